package cluster

import (
	"errors"
	"fmt"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Sentinel errors of the cluster layer. Together with raftstore's they
// cross the wire by name (see Reason), so errors.Is gives the same answer
// for an error raised on this node and for one the leader answered with.
var (
	// ErrNoLeader means no leader is known and no join address is
	// configured to ask: retry once the cluster has elected one. It wraps
	// raftstore.ErrNotLeader, so callers that retry on that retry on this.
	ErrNoLeader = errs.Coded(errs.Unavailable, fmt.Errorf("%w: no leader is known", raftstore.ErrNotLeader))
	// ErrForward means the leader could not be reached over HTTP (refused,
	// timed out, or an answer that is not the API's). Retry later.
	ErrForward = errs.Sentinel(errs.Unavailable, "forwarding to the leader failed")
	// ErrRaftUnreachable means the node at the raft address a joining node
	// gave did not answer a raft RPC (with TLS: did not prove with a
	// certificate of the cluster CA that it is that node): adding it would
	// put a member that never answers into the raft configuration.
	ErrRaftUnreachable = errs.Sentinel(errs.FailedPrecondition, "raft address unreachable from the leader")
	// ErrNotForwardable means a command type that followers never send was
	// offered to the internal propose endpoint.
	ErrNotForwardable = errs.Sentinel(errs.InvalidArgument, "command type cannot be proposed through the cluster API")
	// ErrBadRequest means a cluster request is malformed (missing id,
	// address that is not host:port).
	ErrBadRequest = errs.Sentinel(errs.InvalidArgument, "bad cluster request")
	// ErrLastVoter means a leave would remove the only voter.
	ErrLastVoter = errs.Sentinel(errs.FailedPrecondition, "cannot remove the last voter")
)

// wireError names one sentinel on the wire. rejected marks the kinds the
// state machine wraps in raftstore.ErrRejected, so a decoded error matches
// both, as the original did.
type wireError struct {
	reason   string
	err      error
	rejected bool
}

// wireErrors is the one table of error names. Order matters: the first
// entry that matches an error names it, so specific kinds come before the
// errors they wrap (ErrNoLeader before ErrNotLeader, the rejection kinds
// before ErrRejected).
var wireErrors = []wireError{
	{"NO_LEADER", ErrNoLeader, false},
	{"NOT_LEADER", raftstore.ErrNotLeader, false},
	{"LEADERSHIP_LOST", raftstore.ErrLeadershipLost, false},
	{"FORWARD_FAILED", ErrForward, false},
	{"MEMBERSHIP_CONFLICT", raftstore.ErrMembership, false},
	{"RAFT_UNREACHABLE", ErrRaftUnreachable, false},
	{"LAST_VOTER", ErrLastVoter, false},
	{"NOT_FORWARDABLE", ErrNotForwardable, false},
	{"BAD_CLUSTER_REQUEST", ErrBadRequest, false},
	{"NOT_THE_NODE", ErrNotPeer, false},
	{"PEER_ALIVE", ErrPeerAlive, false},
	{"BUNDLE_TOO_LARGE", raftstore.ErrTooLarge, false},
	{"GENERATION_NOT_NEWER", raftstore.ErrGenerationNotNewer, true},
	{"UNKNOWN_GENERATION", raftstore.ErrUnknownGeneration, true},
	{"GENERATION_STATE", raftstore.ErrGenerationState, true},
	{"UNKNOWN_NODE", raftstore.ErrUnknownNode, true},
	{"NODE_STATE", raftstore.ErrNodeState, true},
	{"UNKNOWN_COMMAND", raftstore.ErrUnknownCommand, false},
	{"INVALID_COMMAND", raftstore.ErrInvalidCommand, false},
	{"REJECTED", raftstore.ErrRejected, false},
}

// ErrorDomain is the AIP-193 ErrorInfo domain of the reasons.
const ErrorDomain = "reconciler"

// Reason returns the wire name of the sentinel err matches, or "".
func Reason(err error) string {
	for _, w := range wireErrors {
		if errors.Is(err, w.err) {
			return w.reason
		}
	}
	return ""
}

// RemoteError is an error answer of another node, as the forwarding layer
// decoded it. It matches the sentinel its reason names (errors.Is), and it
// keeps the HTTP code and status so this node can answer its own client
// with the same ones.
type RemoteError struct {
	// Code and Status are the HTTP code and AIP-193 status name.
	Code   int
	Status string
	// Message is the other node's message, safe to show.
	Message string
	// Reason is the ErrorInfo reason, "" when the other node gave none.
	Reason string

	sentinel error
	rejected bool
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap exposes the sentinel the reason names.
func (e *RemoteError) Unwrap() []error {
	switch {
	case e.sentinel == nil:
		return nil
	case e.rejected:
		return []error{e.sentinel, raftstore.ErrRejected}
	default:
		return []error{e.sentinel}
	}
}

// newRemoteError resolves reason to its sentinel.
func newRemoteError(code int, status, msg, reason string) *RemoteError {
	e := &RemoteError{Code: code, Status: status, Message: msg, Reason: reason}
	for _, w := range wireErrors {
		if w.reason == reason {
			e.sentinel, e.rejected = w.err, w.rejected
			break
		}
	}
	return e
}

// retryable reports whether a forwarded call may succeed if sent again
// soon: the leader is changing or unreachable.
func retryable(err error) bool {
	return errors.Is(err, raftstore.ErrNotLeader) || errors.Is(err, raftstore.ErrLeadershipLost) ||
		errors.Is(err, ErrForward)
}

// BetweenLeaders reports whether err is a node's error answer
// (DecodeError) saying the cluster is between leaders: NO_LEADER,
// NOT_LEADER, LEADERSHIP_LOST or FORWARD_FAILED.
func BetweenLeaders(err error) bool {
	var re *RemoteError
	return errors.As(err, &re) && retryable(re)
}

// Permanent reports whether err is an answer that will not change by
// retrying the same request: a client error (4xx) other than a missing
// leader. Joining stops on such an error instead of retrying forever.
func Permanent(err error) bool {
	if retryable(err) {
		return false
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code >= 400 && re.Code < 500 && re.Code != 408 && re.Code != 429
	}
	for _, s := range []error{raftstore.ErrMembership, ErrRaftUnreachable, ErrBadRequest, ErrNotPeer,
		raftstore.ErrRejected, raftstore.ErrInvalidCommand, ErrNotForwardable, ErrLastVoter} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
