// Package benchdoc keeps docs/benchmarks.md current: `make bench` feeds
// it the output of `go test -bench`, and it rewrites each block of the
// document delimited by <!-- bench:Name --> and <!-- /bench:Name --> with
// that benchmark's latest figures, the command that produced them and
// the date. Prose outside the blocks is left as written.
package benchdoc
