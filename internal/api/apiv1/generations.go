package apiv1

import (
	"maps"
	"slices"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Generation is a generation as GET /v1/generations/{n} shows it. The
// bundle itself is never shown.
type Generation struct {
	Generation uint64 `json:"generation"`
	Commit     string `json:"commit"`
	// Author is the commit's author, "Name <email>" as git has it;
	// RollbackOf the generation a revert restored and RequestedBy who
	// asked for it. Text from the repository, absent when unknown
	// (generations staged before every node ran 1.1.0).
	Author      string `json:"author,omitempty"`
	RollbackOf  uint64 `json:"rollbackOf,omitempty"`
	RequestedBy string `json:"requestedBy,omitempty"`
	// State is STAGED, ACTIVE, SUPERSEDED or INVALID. A generation that
	// was active and was replaced is SUPERSEDED with an activateTime.
	State        string            `json:"state"`
	CreateTime   time.Time         `json:"createTime"`
	ActivateTime time.Time         `json:"activateTime,omitzero"`
	StateTime    time.Time         `json:"stateTime"`
	ReadyNodes   []string          `json:"readyNodes"`
	Errors       []string          `json:"errors"`
	Etags        map[string]string `json:"etags"`
	// Kept: the answering node can answer requests pinned to this
	// generation.
	Kept bool `json:"kept"`
}

// GenerationList answers GET /v1/generations, newest first.
type GenerationList struct {
	Generations []Generation `json:"generations"`
}

// FromGeneration maps a replicated generation; kept says whether the
// answering node still holds its bundle.
func FromGeneration(g raftstore.Generation, kept bool) Generation {
	ready := slices.Sorted(maps.Keys(g.ReadyNodes))
	if ready == nil {
		ready = []string{}
	}
	etags := g.Etags
	if etags == nil {
		etags = map[string]string{}
	}
	return Generation{
		Generation: g.Number, Commit: g.Commit, State: GenerationState(g.State),
		Author: g.Author, RollbackOf: g.RollbackOf, RequestedBy: g.RequestedBy,
		CreateTime: g.CreateTime, ActivateTime: g.ActivateTime, StateTime: g.StateTime,
		ReadyNodes: ready, Errors: GenerationErrors(g), Etags: etags, Kept: kept,
	}
}

// GenerationState names a replicated generation state as the API does:
// RETIRED (active once, then replaced) is SUPERSEDED there.
func GenerationState(s raftstore.GenerationState) string {
	if s == raftstore.GenerationRetired {
		return string(raftstore.GenerationSuperseded)
	}
	return string(s)
}

// GenerationErrors lists the leader's errors, then each node's, prefixed
// with the node id, in node order.
func GenerationErrors(g raftstore.Generation) []string {
	out := append([]string{}, g.LeaderErrors...)
	for _, id := range slices.Sorted(maps.Keys(g.NodeErrors)) {
		for _, e := range g.NodeErrors[id] {
			out = append(out, "node "+id+": "+e)
		}
	}
	return out
}

// Rollback answers POST /v1/generations:rollback.
type Rollback struct {
	TargetGeneration uint64 `json:"targetGeneration"`
	TargetCommit     string `json:"targetCommit"`
	// Commit is the revert commit on the live branch, Revision the same
	// as "main@sha1:<hash>".
	Commit   string `json:"commit"`
	Revision string `json:"revision"`
	Message  string `json:"message"`
	// Generation is the generation made from Commit and State its state
	// when the answer was written; both absent when the leader had not
	// recorded it yet.
	Generation uint64   `json:"generation,omitempty"`
	State      string   `json:"state,omitempty"`
	Errors     []string `json:"errors,omitempty"`
	// PullRequestURL is the revert pull request opened when the push to
	// the live branch was refused ([github]); Commit is then on its
	// branch and no generation is made until it is merged.
	PullRequestURL string `json:"pullRequestUrl,omitempty"`
}
