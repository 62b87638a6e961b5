package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/memlimit"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// Worker validates trees one at a time in a child that outlives each
// validation, so the child derives a changed list from the content it
// validated before, as every node does, instead of compiling a million
// entries afresh for a one-line change (1 to 2.5 s of the leader's
// push→Active; docs/performance.md). The budgets are Runner's, per
// validation: each may grow the child by MemoryLimit over what it holds
// when the tree arrives, within Timeout. A child that exceeds them, or
// fails in any way, is ended and the next validation starts a fresh one;
// a tree that failed so in a child that had served before is validated
// again in a fresh child, so that the verdict never depends on what the
// child held (a fresh child is what Runner uses). The zero value is not
// usable: set Runner.
type Worker struct {
	Runner

	mu     sync.Mutex
	child  *workerChild
	served int // validations the current child has answered
}

// workerChild is one running child and its pipes.
type workerChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *capped
}

// Validate is Runner.Validate in the worker's child.
func (w *Worker) Validate(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) reconcile.Validation {
	w.mu.Lock()
	defer w.mu.Unlock()
	req := request{Files: files, Load: lopts, Engine: eopts}
	var v reconcile.Validation
	err := w.call(req, &v)
	var killed *killedError
	if errors.As(err, &killed) && w.served > 0 {
		w.served = 0 // the retry's child is fresh
		err = w.call(req, &v)
	}
	if err != nil {
		return reconcile.Validation{Problems: []string{fmt.Sprintf("%s: %v", BudgetMessage, err)}}
	}
	w.served++
	return v
}

// Close ends the child, if any.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop()
	return nil
}

// call sends req to the child, starting one if needed, and reads its
// answer within the deadline. On any failure the child is ended.
func (w *Worker) call(req request, out any) error {
	limit, timeout := w.limits()
	if w.child == nil {
		if err := w.start(limit); err != nil {
			return err
		}
	}
	c := w.child
	timer := time.AfterFunc(timeout, func() { _ = c.cmd.Process.Kill() })
	werr := writeRequest(c.stdin, req)
	err := decodeAnswer(c.stdout, out)
	stopped := !timer.Stop()
	if werr == nil && err == nil {
		return nil
	}
	w.stop()
	switch {
	case stopped:
		return &killedError{fmt.Sprintf("killed after %s", timeout)}
	case c.cmd.ProcessState != nil && !c.cmd.ProcessState.Success():
		return &killedError{fmt.Sprintf("child %v (limit %d MiB): %s", c.cmd.ProcessState, limit>>20, memlimit.FirstLine(c.stderr.b.Bytes()))}
	case werr != nil:
		return fmt.Errorf("writing to the child: %w", werr)
	}
	return err
}

// start runs a new child.
func (w *Worker) start(limit uint64) error {
	cmd := w.command(context.Background(), limit) // the deadline is per request (call)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("starting the child: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("starting the child: %w", err)
	}
	stderr := &capped{max: 4 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running the child: %w", err)
	}
	w.child = &workerChild{cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 64<<10), stderr: stderr}
	w.served = 0
	return nil
}

// stop ends the child and waits for it, so that its exit status is known.
func (w *Worker) stop() {
	c := w.child
	if c == nil {
		return
	}
	w.child = nil
	_ = c.stdin.Close() // a child between requests ends at EOF
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}
