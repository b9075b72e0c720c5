// Package volumecopy is a Machine's own record of its Provisioned Volume
// copies (design: Expected copies, One lease, one fence, Volume copy
// transitions): per volume the copy's role (Writer, Mirror or none), a
// Writer's epoch and the floor, the newest Volume Run gen this Machine
// accepted for the copy. Apply is SetVolumeCopy's transition table; Store
// keeps the records in one JSON file under the daemon's data directory.
// It never reads another Machine's copy and keeps no record of a run.
package volumecopy
