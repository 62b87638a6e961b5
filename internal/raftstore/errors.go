package raftstore

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/errs"
)

// Sentinel errors. Callers match them with errors.Is; the raft ones are
// aliases, so errors.Is(err, raft.ErrNotLeader) and
// errors.Is(err, raftstore.ErrNotLeader) agree and a forwarding layer can
// test for either.
var (
	// ErrNotLeader means the command must be sent to the leader instead.
	ErrNotLeader = raft.ErrNotLeader
	// ErrLeadershipLost means leadership was lost while the command was in
	// flight: it may or may not have been committed. Retry idempotently.
	ErrLeadershipLost = raft.ErrLeadershipLost

	// ErrRejected marks every error returned by Apply for a command that
	// reached the log but was refused by the state machine. It is
	// deterministic: every node refused it the same way, nothing changed.
	ErrRejected = errors.New("command rejected")
	// ErrInvalidCommand means a payload failed validation (missing field,
	// zero time, payload too large).
	ErrInvalidCommand = errs.Sentinel(errs.InvalidArgument, "invalid command")
	// ErrTooLarge means a generation bundle exceeds MaxGenerationBytes.
	ErrTooLarge = errs.Sentinel(errs.FailedPrecondition, "generation bundle too large")
	// ErrMissingChunk means a Stage refers to a chunk the state does not
	// hold (it was never put, or was collected since): propose it again.
	ErrMissingChunk = errors.New("chunk missing")
	// ErrTableFull means a put would add a record beyond a table's bound
	// (MaxBranches, MaxPulls, MaxClaims).
	ErrTableFull = errors.New("table full")
	// ErrUnknownCommand means this build does not know the command type or
	// version (a newer proposer during a rolling upgrade).
	ErrUnknownCommand = errs.Sentinel(errs.InvalidArgument, "unknown command type or version")
	// ErrGenerationNotNewer means a new generation number is not above the
	// highest one known: generation numbers only grow.
	ErrGenerationNotNewer = errs.Sentinel(errs.FailedPrecondition, "generation number does not grow")
	// ErrUnknownGeneration means the generation is not (or no longer) known.
	ErrUnknownGeneration = errs.Sentinel(errs.NotFound, "unknown generation")
	// ErrGenerationState means the generation's state forbids the command,
	// e.g. activating a generation that is not STAGED.
	ErrGenerationState = errs.Sentinel(errs.FailedPrecondition, "generation state forbids this")
	// ErrUnknownNode means the node is not registered.
	ErrUnknownNode = errs.Sentinel(errs.NotFound, "unknown node")
	// ErrNodeState means the node's state forbids the command.
	ErrNodeState = errs.Sentinel(errs.FailedPrecondition, "node state forbids this")

	// ErrCorrupt means the on-disk raft data cannot be trusted. The node
	// must not serve from it; the fix is to move the data directory aside
	// and rejoin the cluster, which sends a snapshot.
	ErrCorrupt = errors.New("raft data is corrupt")
	// ErrDataDirLocked means another process holds the raft database.
	ErrDataDirLocked = errors.New("raft data directory is in use by another process")
	// ErrMembership means a membership change conflicts with the current
	// configuration (same id at another address, or the reverse).
	ErrMembership = errs.Sentinel(errs.AlreadyExists, "membership conflict")

	// ErrConflict rejects a conditional write whose record changed since
	// the proposer read it (PutOperation version 2).
	ErrConflict = errs.Sentinel(errs.Aborted, "record changed since it was read")

	// ErrNotYet refuses, before the log, a command that a member of the
	// cluster runs too old a release to apply (features.go).
	ErrNotYet = errs.Sentinel(errs.FailedPrecondition, "not every member can apply this command yet")
)

// reject builds the error result of a refused command. Both ErrRejected and
// kind match with errors.Is.
func reject(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrRejected, kind, fmt.Sprintf(format, args...))
}

// invalid builds a validation error for a payload.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidCommand, fmt.Sprintf(format, args...))
}
