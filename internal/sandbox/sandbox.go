// Package sandbox validates an untrusted policies tree in a child process
// with an OS-enforced memory limit and a deadline, so that a tree which
// slips past the parse budgets can kill only that child, never the leader
// (as Argo CD's repo-server isolates manifest generation). The child is the
// same binary run as `reconciler validate-worker`: Runner is the parent's
// side, Serve the child's.
package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/memlimit"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// Budgets of one validation in the child.
const (
	// DefaultMemoryLimit is the address space the child may add to what
	// it holds after start-up (RLIMIT_AS), and its Go memory limit.
	DefaultMemoryLimit = 1 << 30
	// DefaultTimeout is how long the child may run before it is killed.
	DefaultTimeout = 30 * time.Second
	// WorkerCommand is the hidden subcommand that runs Serve.
	WorkerCommand = "validate-worker"
	// maxRequestBytes bounds what the child reads of one request: a
	// tree within policy.MaxTreeBytes and its lists within
	// policy.MaxTreeListBytes, raw (wire.go), with room for the header.
	maxRequestBytes = policy.MaxTreeBytes + policy.MaxTreeListBytes + maxHeaderBytes
	// maxResponseBytes bounds what the parent reads back.
	maxResponseBytes = 16 << 20
)

// BudgetMessage starts the problem a killed or failed child gives.
const BudgetMessage = "validation exceeded its memory/time budget"

// request is what the parent writes to the child's stdin: a tree to
// validate, or with Policy one policy to compile (CheckPolicy).
type request struct {
	Files  map[string][]byte
	Policy *policy.Policy `json:",omitempty"`
	// ListData is the data of Policy's lists by hash, which a policy's
	// JSON leaves out (policy.List).
	ListData map[string][]byte `json:",omitempty"`
	Load     policy.LoadOptions
	Engine   engine.Options
}

// Runner runs validations in child processes of Path.
type Runner struct {
	// Path is a reconciler binary (os.Executable of one).
	Path string
	// MemoryLimit is the child's memory budget in bytes; 0 means
	// DefaultMemoryLimit.
	MemoryLimit uint64
	// Timeout is the child's deadline; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Validate is reconcile.Validate run in a child: a child killed by its
// memory limit or deadline, or that fails in any other way, gives an
// invalid verdict naming the budget.
func (r Runner) Validate(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) reconcile.Validation {
	var v reconcile.Validation
	if err := r.call(request{Files: files, Load: lopts, Engine: eopts}, &v); err != nil {
		return reconcile.Validation{Problems: []string{fmt.Sprintf("%s: %v", BudgetMessage, err)}}
	}
	return v
}

// killedError is a child that ran and did not finish: killed at its
// deadline, or ended by its memory limit (or any crash).
type killedError struct{ msg string }

func (e *killedError) Error() string { return e.msg }

// call runs one child on req and decodes its answer into out. A child
// that ran and did not finish is a *killedError; one that could not start
// or answered nonsense is another error.
func (r Runner) call(req request, out any) error {
	var in bytes.Buffer
	if err := writeRequest(&in, req); err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	limit, timeout := r.limits()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := r.command(ctx, limit)
	cmd.Stdin = &in
	stdout, stderr := &capped{max: maxResponseBytes + 4}, &capped{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		switch {
		case ctx.Err() != nil:
			return &killedError{fmt.Sprintf("killed after %s", timeout)}
		case errors.As(err, &exit):
			return &killedError{fmt.Sprintf("child %v (limit %d MiB): %s", err, limit>>20, memlimit.FirstLine(stderr.b.Bytes()))}
		}
		return fmt.Errorf("running the child: %w", err)
	}
	if stdout.over {
		return errors.New("verdict too large")
	}
	return decodeAnswer(&stdout.b, out)
}

// command is the child process: the same binary's worker command.
func (r Runner) command(ctx context.Context, limit uint64) *exec.Cmd {
	return memlimit.Command(ctx, r.Path, WorkerCommand, limit)
}

// decodeAnswer reads the child's one-frame answer into out.
func decodeAnswer(r io.Reader, out any) error {
	b, err := readFrame(r, maxResponseBytes)
	if err != nil {
		return fmt.Errorf("reading the verdict: %w", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("reading the verdict: %w", err)
	}
	return nil
}

// limits are the child's memory limit and deadline, defaults applied.
func (r Runner) limits() (uint64, time.Duration) {
	limit, timeout := r.MemoryLimit, r.Timeout
	if limit == 0 {
		limit = DefaultMemoryLimit
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return limit, timeout
}

// Serve is the child: it limits its own memory to limit bytes more than
// it holds now, then answers requests from stdin until the parent closes
// it, one at a time: a tree to validate (its verdict as JSON) or a policy
// to check. A one-off child (Runner) gets one request; a Worker's child
// many, and keeps what it compiled for the next (keeper). Each request may
// grow the child by limit over what it held when the request came.
func Serve(stdin io.Reader, stdout io.Writer, limit uint64) error {
	if err := memlimit.Limit(limit); err != nil {
		return fmt.Errorf("limiting memory: %w", err)
	}
	rebase := memlimit.Watch(limit)
	in, k := bufio.NewReaderSize(stdin, 1<<20), newKeeper(limit)
	settled := make(chan struct{})
	close(settled)
	for {
		if _, err := in.Peek(1); errors.Is(err, io.EOF) {
			return nil // a one-off child ends here, without settling
		}
		// The request's bytes count against its budget: measured from
		// here, once the last one has settled.
		<-settled
		rebase()
		req, err := readRequest(in)
		if err != nil {
			return fmt.Errorf("reading the request: %w", err)
		}
		answer, err := json.Marshal(k.answer(req))
		if err != nil {
			return fmt.Errorf("encoding the verdict: %w", err)
		}
		if err := writeFrame(stdout, answer); err != nil {
			return fmt.Errorf("writing the verdict: %w", err)
		}
		// Off the parent's path: it has its answer, and the next request
		// waits for this.
		settled = make(chan struct{})
		go func(done chan struct{}) {
			k.settle()
			close(done)
		}(settled)
	}
}

// capped is a buffer that keeps at most max bytes and notes the rest.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); len(p) > room {
		c.over = true
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}
