// Package dockerlog reads the files of Docker's "local" log driver
// (/var/lib/docker/containers/<id>/local-logs/container.log), a format
// Docker does not document. Each record is a protobuf message framed by
// its length, as a 4-byte big-endian integer, before and after it:
//
//	[size uint32 BE][LogEntry, size bytes][size uint32 BE]
//
// LogEntry's fields, as Docker writes them: 1 source ("stdout" or
// "stderr"), 2 time_nano (int64), 3 line (bytes, without its newline),
// 4 partial (bool: the line goes on in the next record), 5 partial
// metadata {1 last (bool), 2 id (string), 3 ordinal (int32)}.
//
// A reader must survive whatever it finds on disk: Decode skips bytes that
// do not start a well-formed frame one at a time, counts them as corrupt,
// and carries on with the next frame that parses. Unknown protobuf fields
// are ignored, so a newer Docker adding fields still reads.
package dockerlog
