package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// docker runs the docker CLI and returns its trimmed stdout. The error
// carries the command and Docker's own message, which names what failed.
func docker(ctx context.Context, args ...string) (string, error) {
	return dockerIO(ctx, nil, args...)
}

// dockerIO is docker with stdin attached.
func dockerIO(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdin = stdin
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return strings.TrimSpace(stdout.String()), fmt.Errorf("docker %s: %w: %s", strings.Join(short(args), " "), err, msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// short keeps error messages readable when a command has many flags.
func short(args []string) []string {
	if len(args) > 4 {
		return append(append([]string{}, args[:4]...), "...")
	}
	return args
}

// pipe runs `docker from...` and streams its stdout into `docker to...`,
// as in `docker save IMAGE | docker exec -i M docker load`.
func pipe(ctx context.Context, from, to []string) error {
	src := exec.CommandContext(ctx, "docker", from...)
	out, err := src.StdoutPipe()
	if err != nil {
		return err
	}
	var srcErr bytes.Buffer
	src.Stderr = &srcErr
	if err := src.Start(); err != nil {
		return fmt.Errorf("docker %s: %w", strings.Join(short(from), " "), err)
	}
	_, dstErr := dockerIO(ctx, out, to...)
	werr := src.Wait()
	if dstErr != nil {
		return dstErr
	}
	if werr != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(short(from), " "), werr, strings.TrimSpace(srcErr.String()))
	}
	return nil
}

// Docker runs the docker CLI with args, for tests that need a command the
// lab does not wrap.
func Docker(ctx context.Context, args ...string) (string, error) { return docker(ctx, args...) }
