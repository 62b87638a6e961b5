package memlimit

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"time"
)

// Command is the parent's side of a bounded child: the node's binary at
// path run as subcommand, which is to call Limit and Watch with limit.
// The child gets nothing of the node's environment (it may hold
// credentials), one core (it runs beside the node's work) and no
// goroutine dump of what it held when it ends.
func Command(ctx context.Context, path, subcommand string, limit uint64) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, subcommand, strconv.FormatUint(limit, 10))
	cmd.Env = []string{"GOMAXPROCS=1", "GOTRACEBACK=none"}
	cmd.WaitDelay = time.Second
	return cmd
}

// FirstLine is the first line of a child's stderr, for the error that
// reports it ("no output" when there is none).
func FirstLine(stderr []byte) string {
	if i := bytes.IndexByte(stderr, '\n'); i >= 0 {
		stderr = stderr[:i]
	}
	if len(stderr) == 0 {
		return "no output"
	}
	return string(stderr)
}
