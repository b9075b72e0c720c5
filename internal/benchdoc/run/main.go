// Command run rewrites the bench blocks of a document from `go test
// -bench` output on stdin (package benchdoc); `make bench` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ployz/ployz/internal/benchdoc"
	"github.com/ployz/ployz/internal/fsutil"
)

func main() {
	doc := flag.String("doc", "docs/benchmarks.md", "document to rewrite")
	command := flag.String("command", "make bench", "command named as the figures' source")
	flag.Parse()
	if err := run(*doc, *command); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

func run(doc, command string) error {
	res, err := benchdoc.Parse(os.Stdin)
	if err != nil {
		return err
	}
	// Only a regular file is rewritten (an atomic rename over a device
	// would replace it).
	if fi, err := os.Stat(doc); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", doc)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	out, done, err := benchdoc.Rewrite(string(b), res, command, time.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if err := fsutil.WriteFileAtomic(doc, []byte(out), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchdoc: %s: %d block(s) rewritten %v, %d result(s) read\n", doc, len(done), done, len(res))
	return nil
}
