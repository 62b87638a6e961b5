package gitsource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/policyrollout/reconciler/internal/memlimit"
)

// RepackCommand is the hidden subcommand of the node's binary that runs
// ServeRepack: Housekeep writes its pack in that child, so that go-git's
// delta search (a few hundred MB of heap for a large list's history,
// docs/git.md) is neither in the leader's heap nor something a term that
// ends must wait for: the child is killed at once.
const RepackCommand = "repack-worker"

// DefaultRepackMemoryLimit is the memory a repack child may hold beyond
// what it holds at start when RepackChild.MemoryLimit is 0: twice the
// peak measured for 21 versions of a 1,000,000-entry list (docs/git.md).
const DefaultRepackMemoryLimit = 512 << 20

// maxRepackRequest bounds what the child reads: a few thousand refs'
// hashes and two paths.
const maxRepackRequest = 16 << 20

// RepackChild is where Housekeep writes its pack: in a child process of
// Path (the node's binary, run as RepackCommand), or in this process when
// Path is "" (library use and tests that have no binary to run).
type RepackChild struct {
	Path string
	// MemoryLimit is the child's budget in bytes (Go memory limit,
	// RLIMIT_AS on Linux, a watchdog: internal/memlimit); 0 means
	// DefaultRepackMemoryLimit.
	MemoryLimit uint64
}

// repackRequest is what the parent writes to the child's stdin.
type repackRequest struct {
	Dir    string   // the clone, read through a storage of the child's
	Out    string   // a fresh directory the new pack and index go to
	Heads  []string // the commits (and objects) to pack what they reach of
	Window uint
}

// repackAnswer is the child's one line on stdout: the new pack's hash
// and the child's peak resident memory (0 where it is not measured).
type repackAnswer struct {
	Pack    string
	PeakRSS uint64
}

// repackError is a child that did not finish: killed by its memory
// limit, or failed. The clone is as it was.
type repackError struct {
	limit uint64
	state string
	msg   string
}

func (e *repackError) Error() string {
	return fmt.Sprintf("gitsource: the repack child (memory limit %d MiB) %s: %s; the clone is unchanged "+
		"(raise [git] repack_memory_limit_bytes if it ran out of memory)", e.limit>>20, e.state, e.msg)
}

// write runs writePack in a child and returns the new pack's hash and the
// child's peak resident memory, as it measured it. Cancelling ctx kills
// the child.
func (c RepackChild) write(ctx context.Context, req repackRequest) (plumbing.Hash, int64, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return plumbing.ZeroHash, 0, fmt.Errorf("gitsource: encoding the repack request: %w", err)
	}
	limit := c.MemoryLimit
	if limit == 0 {
		limit = DefaultRepackMemoryLimit
	}
	cmd := memlimit.Command(ctx, c.Path, RepackCommand, limit)
	cmd.Stdin = bytes.NewReader(in)
	stdout, stderr := &limitedBuffer{max: 4 << 10}, &limitedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return plumbing.ZeroHash, 0, ctx.Err()
	case err != nil:
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return plumbing.ZeroHash, 0, fmt.Errorf("gitsource: running the repack child: %w", err)
		}
		return plumbing.ZeroHash, 0, &repackError{limit: limit, state: exit.ProcessState.String(), msg: memlimit.FirstLine([]byte(stderr.String()))}
	}
	var a repackAnswer
	if err := json.Unmarshal([]byte(stdout.String()), &a); err != nil {
		return plumbing.ZeroHash, 0, fmt.Errorf("gitsource: reading the repack child's answer: %w", err)
	}
	if !plumbing.IsHash(a.Pack) {
		return plumbing.ZeroHash, 0, fmt.Errorf("gitsource: the repack child answered %q, not a pack's hash", a.Pack)
	}
	return plumbing.NewHash(a.Pack), int64(a.PeakRSS), nil
}

// ServeRepack is the child (RepackCommand): it limits its memory to limit
// bytes over what it holds now, reads one repackRequest from stdin, writes
// the pack into the request's Out directory and answers its hash on
// stdout. A child that exceeds its limit is ended by the watchdog (exit
// status 3); the parent removes Out.
func ServeRepack(ctx context.Context, stdin io.Reader, stdout io.Writer, limit uint64) error {
	if err := memlimit.Limit(limit); err != nil {
		return fmt.Errorf("limiting memory: %w", err)
	}
	memlimit.Watch(limit)
	var req repackRequest
	if err := json.NewDecoder(io.LimitReader(stdin, maxRepackRequest)).Decode(&req); err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	heads := make([]plumbing.Hash, 0, len(req.Heads))
	for _, h := range req.Heads {
		if !plumbing.IsHash(h) {
			return fmt.Errorf("reading the request: %q is not a hash", h)
		}
		heads = append(heads, plumbing.NewHash(h))
	}
	h, err := writePack(ctx, req.Dir, req.Out, heads, req.Window)
	if err != nil {
		return err
	}
	rss, _ := memlimit.PeakRSS() // 0 where not measured: a log field, not the answer
	return json.NewEncoder(stdout).Encode(repackAnswer{Pack: h.String(), PeakRSS: rss})
}
