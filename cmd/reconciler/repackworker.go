package main

import (
	"fmt"
	"strconv"

	"github.com/policyrollout/reconciler/internal/gitsource"
)

// repackWorker implements the hidden `reconciler repack-worker LIMIT`:
// the child a node's housekeeping writes the clone's new pack in
// (gitsource.RepackChild), limited to LIMIT more bytes of memory. It
// reads one request on stdin from its parent, never from the network.
func (a *app) repackWorker(args []string) int {
	limit, ok := a.workerLimit(gitsource.RepackCommand, args)
	if !ok {
		return exitUsage
	}
	if err := gitsource.ServeRepack(a.ctx, a.stdin, a.stdout, limit); err != nil {
		fmt.Fprintf(a.stderr, "reconciler %s: %v\n", gitsource.RepackCommand, err)
		return exitCheck
	}
	return exitOK
}

// workerLimit is the LIMIT argument of a hidden worker command (name),
// a positive number of bytes; ok is false, with the usage said, if args
// are not one such.
func (a *app) workerLimit(name string, args []string) (limit uint64, ok bool) {
	if len(args) != 1 {
		fmt.Fprintf(a.stderr, "reconciler %s: want LIMIT (bytes)\n", name)
		return 0, false
	}
	limit, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || limit == 0 {
		fmt.Fprintf(a.stderr, "reconciler %s: LIMIT %q must be a positive number of bytes\n", name, args[0])
		return 0, false
	}
	return limit, true
}
