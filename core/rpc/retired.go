package rpc

// retired are commands ployzd served once and no longer does, with what
// replaced them. A client that still sends one (an older CLI) gets an
// unsupported error that says so and names the replacement, instead of
// "not served" (which reads as an older ployzd).
var retired = map[string]string{
	// Docker-direct logs (existing Containers only), replaced by the Log
	// Store, which keeps removed Containers' output too.
	"container_logs": CmdLogHistory + " (capability " + CapLogHistory + ")",
	"follow_logs":    CmdTailLogs + " (capability " + CapTailLogs + ")",
}

// retiredErr is the answer to a retired command, or nil when cmd is not one.
func retiredErr(cmd string) *Error {
	repl, ok := retired[cmd]
	if !ok {
		return nil
	}
	return Errorf(CodeUnsupported, "command %q was retired; this Machine serves %s instead: upgrade the ployz CLI", cmd, repl).
		With("command", cmd).With("retired", true)
}

// unknownCommand is the answer to a command with no route.
func unknownCommand(cmd string, streaming bool) *Error {
	if e := retiredErr(cmd); e != nil {
		return e
	}
	what := "command"
	if streaming {
		what = "streaming command"
	}
	return Errorf(CodeUnsupported, "%s %q is not served by this Machine", what, cmd).With("command", cmd)
}
