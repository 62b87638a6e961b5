package github

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// CommandRecordPrefix names the replicated claims of comment commands
// ("commands/<comment id>"). The leader writes a claim before it runs a
// command, so a webhook redelivered after a leader change (GitHub retries
// a delivery that timed out; a user may press "Redeliver") is recognised
// by the new leader and not run twice. The claim is written first: a
// leader that dies between claim and run loses that command (at most
// once), which the user sees as no reply and repeats — better than a
// second merge or a second reply.
const CommandRecordPrefix = "commands/"

// maxCommandRecords bounds the claims kept; the oldest go first. Claims
// of a pull request are also deleted with its record when it closes.
const maxCommandRecords = 256

// CommandRecord is one claimed comment command.
type CommandRecord struct {
	CommentID int64     `json:"commentId"`
	PR        int       `json:"pr"`
	User      string    `json:"user"`
	Verb      string    `json:"verb"`
	Time      time.Time `json:"time"`
}

// ReadCommandRecords returns the replicated claims, oldest first.
func ReadCommandRecords(st *raftstore.State) []CommandRecord {
	var out []CommandRecord
	for name, doc := range st.Experiments {
		if !strings.HasPrefix(name, CommandRecordPrefix) {
			continue
		}
		var r CommandRecord
		if err := json.Unmarshal(doc.Data, &r); err == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b CommandRecord) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return int(a.CommentID - b.CommentID)
	})
	return out
}

func commandRecordName(id int64) string { return CommandRecordPrefix + strconv.FormatInt(id, 10) }

// claimCommand records that cmd runs now. It returns false when a claim
// for its comment exists already (a previous leader ran it). A command
// without a comment id (never from GitHub) is not claimed.
func (g *Worker) claimCommand(ctx context.Context, cmd webhook.Command) (bool, error) {
	if cmd.CommentID == 0 {
		return true, nil
	}
	st := g.cfg.Store.State()
	if _, ok := st.Experiments[commandRecordName(cmd.CommentID)]; ok {
		return false, nil
	}
	p, err := reconcile.PutRecord(commandRecordName(cmd.CommentID), CommandRecord{CommentID: cmd.CommentID, PR: cmd.PR,
		User: cmd.User, Verb: cmd.Verb, Time: g.cfg.Now().UTC()})
	if err != nil {
		return false, err
	}
	if _, err := g.cfg.Store.Propose(ctx, p); err != nil {
		return false, err
	}
	g.pruneCommandRecords(ctx, nil)
	return true, nil
}

// pruneCommandRecords deletes the claims of the closed pull requests
// (closed nil: none) and the oldest beyond maxCommandRecords. Failures are
// left for the next call.
func (g *Worker) pruneCommandRecords(ctx context.Context, closed map[int]bool) {
	recs := ReadCommandRecords(g.cfg.Store.State())
	excess := len(recs) - maxCommandRecords
	for _, r := range recs {
		if excess <= 0 && !closed[r.PR] {
			continue
		}
		if _, err := g.cfg.Store.Propose(ctx, &raftstore.DeleteExperiment{Name: commandRecordName(r.CommentID)}); err != nil {
			g.log.Debug("cannot delete a command claim; later", "comment", r.CommentID, "error", err)
			return
		}
		excess--
	}
}
