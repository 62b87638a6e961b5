package reconcile

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// The replicated claims of comment commands live in raftstore's Claims
// table, by comment id. The leader writes a claim before it runs a
// command, so a webhook redelivered after a leader change (GitHub retries
// a delivery that timed out; a user may press "Redeliver") is recognised
// by the new leader and not run twice. The claim is written first: a
// leader that dies between claim and run loses that command (at most
// once), which the user sees as no reply and repeats — better than a
// second merge or a second reply. CommandRecordPrefix names a claim in
// logs.
const CommandRecordPrefix = "commands/"

// maxCommandRecords bounds the claims kept; the oldest go first. Claims
// of a pull request are also deleted with its record when it closes.
const maxCommandRecords = 256

// CommandRecord is one claimed comment command.
type CommandRecord = raftstore.CommandClaim

// ReadCommandRecords returns the replicated claims, oldest first.
func ReadCommandRecords(st *raftstore.State) []CommandRecord {
	out := slices.Collect(maps.Values(st.Claims))
	slices.SortFunc(out, func(a, b CommandRecord) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.CommentID, b.CommentID)
	})
	return out
}

// claimCommand records that cmd runs now, together with the deletes of
// the oldest claims beyond maxCommandRecords (one log entry). It returns
// false when a claim for its comment exists already (a previous leader ran
// it). A command without a comment id (never from GitHub) is not claimed.
func (l *Loop) claimCommand(ctx context.Context, cmd webhook.Command) (bool, error) {
	if cmd.CommentID == 0 {
		return true, nil
	}
	st := l.cfg.Store.State()
	if _, ok := st.Claims[cmd.CommentID]; ok {
		return false, nil
	}
	claim := CommandRecord{CommentID: cmd.CommentID, PR: cmd.PR, User: raftstore.ClipText(cmd.User, raftstore.MaxKeyBytes),
		Verb: raftstore.ClipText(cmd.Verb, raftstore.MaxKeyBytes), Time: l.cfg.Now().UTC()}
	ps := append([]raftstore.Payload{&raftstore.PutClaim{Claim: claim}}, claimDeletes(st, nil, 1)...)
	p, err := raftstore.Batch(ps...)
	if err != nil {
		return false, err
	}
	if _, err := l.cfg.Store.Propose(ctx, p); err != nil {
		return false, err
	}
	return true, nil
}

// pruneCommandRecords deletes the claims of the closed pull requests
// (closed nil: none) and the oldest beyond maxCommandRecords, in one log
// entry. A failure is left for the next call.
func (l *Loop) pruneCommandRecords(ctx context.Context, closed map[int]bool) {
	p, err := raftstore.Batch(claimDeletes(l.cfg.Store.State(), closed, 0)...)
	if err == nil && p != nil {
		_, err = l.cfg.Store.Propose(ctx, p)
	}
	if err != nil {
		l.log.Debug("cannot delete command claims; later", "error", err)
	}
}

// claimDeletes are the deletes of the claims of the closed pull requests
// and of the oldest claims, so that adding more fit under
// maxCommandRecords.
func claimDeletes(st *raftstore.State, closed map[int]bool, adding int) []raftstore.Payload {
	recs := ReadCommandRecords(st)
	excess := len(recs) + adding - maxCommandRecords
	var out []raftstore.Payload
	for _, r := range recs {
		if excess <= 0 && !closed[r.PR] {
			continue
		}
		out = append(out, &raftstore.DeleteClaim{CommentID: r.CommentID})
		excess--
	}
	return out
}
