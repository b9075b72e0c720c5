package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"
)

// oneShot is `testapp --exit-code N [--say TEXT] [--show PATH] [--cat]
// [--sleep D]`: a one-off task for `ployz run`. It prints MESSAGE (the
// Service's environment), TEXT and PATH's content on stdout, whether
// stdin is a terminal on stderr, copies stdin to stdout with --cat,
// sleeps D (a SIGINT or SIGTERM ends the sleep: it says so and exits
// 128+signal), and exits N.
func oneShot(args []string) int {
	fs := flag.NewFlagSet("testapp", flag.ContinueOnError)
	code := fs.Int("exit-code", 0, "exit code")
	say := fs.String("say", "", "a line to print on stdout")
	show := fs.String("show", "", "a file to print on stdout")
	cat := fs.Bool("cat", false, "copy stdin to stdout")
	sleep := fs.Duration("sleep", 0, "sleep this long, or until SIGINT or SIGTERM")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("testapp run: MESSAGE=%s\n", os.Getenv("MESSAGE"))
	if *say != "" {
		fmt.Println(*say)
	}
	if *show != "" {
		b, err := os.ReadFile(*show)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testapp run: %v\n", err)
			return 2
		}
		os.Stdout.Write(b) // stdout
	}
	fmt.Fprintf(os.Stderr, "testapp run: tty=%t\n", term.IsTerminal(int(os.Stdin.Fd())))
	if *cat {
		io.Copy(os.Stdout, os.Stdin) // ends with stdin
	}
	if *sleep > 0 {
		fmt.Println("testapp run: sleeping")
		select {
		case s := <-sigs:
			fmt.Printf("testapp run: got %s\n", s)
			return 128 + int(s.(syscall.Signal))
		case <-time.After(*sleep):
		}
	}
	fmt.Fprintf(os.Stderr, "testapp run: exit %d\n", *code)
	return *code
}
