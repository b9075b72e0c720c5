// Command emit is the entry point of dockertest's image: a Container's
// output, scripted by its arguments as a sequence of steps, with no shell
// in the image.
//
//	out TEXT              TEXT and a newline on stdout
//	err TEXT              TEXT and a newline on stderr
//	raw TEXT              TEXT on stdout, no newline
//	sleep DURATION        e.g. 1s, 250ms
//	lines FORMAT FROM TO  FORMAT (with %d) for FROM <= i < TO, a line each
//	every DURATION N FORMAT  forever: N lines each DURATION; %d in FORMAT
//	                      counts the lines printed so far
//	burn                  spin one core forever
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	if err := run(out, os.Args[1:]); err != nil {
		out.Flush()
		fmt.Fprintln(os.Stderr, "emit:", err)
		os.Exit(2)
	}
	out.Flush()
}

// run executes the steps in args, flushing stdout before each pause so
// lines are in Docker's log when a test looks.
func run(out *bufio.Writer, args []string) error {
	for len(args) > 0 {
		n, err := step(out, args)
		if err != nil {
			return err
		}
		args = args[n:]
	}
	return nil
}

// step runs the step at the head of args and returns how many arguments
// it took.
func step(out *bufio.Writer, args []string) (int, error) {
	need := map[string]int{"out": 2, "err": 2, "raw": 2, "sleep": 2, "lines": 4, "every": 4, "burn": 1}[args[0]]
	if need == 0 {
		return 0, fmt.Errorf("unknown step %q", args[0])
	}
	if len(args) < need {
		return 0, fmt.Errorf("step %q needs %d arguments, has %d", args[0], need-1, len(args)-1)
	}
	switch args[0] {
	case "out":
		fmt.Fprintln(out, args[1])
	case "err":
		out.Flush()
		fmt.Fprintln(os.Stderr, args[1])
	case "raw":
		fmt.Fprint(out, args[1])
	case "sleep":
		d, err := time.ParseDuration(args[1])
		if err != nil {
			return 0, fmt.Errorf("sleep: %w", err)
		}
		out.Flush()
		time.Sleep(d)
	case "lines":
		return need, lines(out, args[1], args[2], args[3])
	case "every":
		return need, every(out, args[1], args[2], args[3])
	case "burn":
		//lint:ignore SA5002 burning CPU is this command's whole job
		for {
		}
	}
	return need, nil
}

func lines(out *bufio.Writer, format, from, to string) error {
	a, err := strconv.Atoi(from)
	if err != nil {
		return fmt.Errorf("lines FROM: %w", err)
	}
	b, err := strconv.Atoi(to)
	if err != nil {
		return fmt.Errorf("lines TO: %w", err)
	}
	for i := a; i < b; i++ {
		fmt.Fprintln(out, line(format, i))
	}
	return nil
}

func every(out *bufio.Writer, period, count, format string) error {
	d, err := time.ParseDuration(period)
	if err != nil {
		return fmt.Errorf("every DURATION: %w", err)
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return fmt.Errorf("every N: %w", err)
	}
	for i := 0; ; {
		for range n {
			fmt.Fprintln(out, line(format, i))
			i++
		}
		out.Flush()
		time.Sleep(d)
	}
}

// line formats i into format when it has a verb, else is format itself.
func line(format string, i int) string {
	if strings.Contains(format, "%") {
		return fmt.Sprintf(format, i)
	}
	return format
}
