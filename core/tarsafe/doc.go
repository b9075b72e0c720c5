// Package tarsafe reads the entries of an archive that came from outside
// the Machine (a shipped directory, an image upload, a release bundle)
// refusing what would make a few bytes of it expand without bound.
package tarsafe
