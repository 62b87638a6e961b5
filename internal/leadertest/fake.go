// Package leadertest holds the fakes the leader's packages test with
// (internal/reconcile, internal/experiments, internal/github): a store that
// applies proposals with raftstore's own Applier, and an in-memory git
// repository with git's shape.
package leadertest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Store applies proposals to a State with raftstore's own Applier,
// stamping times as Store.Propose does, and signals subscribers.
type Store struct {
	mu       sync.Mutex
	state    *raftstore.State
	proposed []raftstore.CommandType
	subs     []chan struct{}
	now      time.Time
}

func NewStore() *Store {
	return &Store{state: raftstore.NewState(), now: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)}
}

func (f *Store) State() *raftstore.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *Store) Subscribe() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	f.subs = append(f.subs, ch)
	return ch, func() {}
}

func (f *Store) Propose(_ context.Context, p raftstore.Payload) (raftstore.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(time.Second)
	switch v := p.(type) {
	case *raftstore.StageGeneration:
		v.CreateTime = f.now
	case *raftstore.ActivateGeneration:
		v.Time = f.now
	case *raftstore.MarkInvalid:
		v.Time = f.now
	case *raftstore.ReportReady:
		v.Time = f.now
	case *raftstore.ReportFailed:
		v.Time = f.now
	}
	cmd, err := raftstore.NewCommand(p)
	if err != nil {
		return raftstore.Result{}, err
	}
	f.proposed = append(f.proposed, cmd.Type)
	next := f.state.Clone()
	err = (&raftstore.Applier{State: next}).Apply(cmd)
	next.LastIndex++
	f.state = next
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return raftstore.Result{Index: next.LastIndex}, err
}

// Count returns how many commands of type t were proposed.
func (f *Store) Count(t raftstore.CommandType) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.proposed {
		if p == t {
			n++
		}
	}
	return n
}

// Total returns how many commands were proposed.
func (f *Store) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.proposed)
}

// FixedMembers always requires the same nodes.
type FixedMembers []string

func (m FixedMembers) Required(*raftstore.State) []string { return m }

// Unloadable never finds a generation unloadable.
func (m FixedMembers) Unloadable(*raftstore.State) []string { return nil }

// Repo is an in-memory repository with git's shape: commits with a
// first parent and a whole tree each, and branches pointing at them. It
// implements Source.
type Repo struct {
	Mu       sync.Mutex
	n        int
	parent   map[string]string
	trees    map[string]map[string][]byte
	branches map[string]string
	Pulls    map[int]string // refs/pull/N/head
	fetchErr error
	// Block, when set, makes Fetch wait for it (or ctx) first.
	Block chan struct{}
	// PushErr, when set, fails Revert.
	PushErr error
	// Reverts are the Revert requests received.
	Reverts   []gitsource.RevertRequest
	fetches   int
	lopts     policy.LoadOptions
	filesRead int
}

func NewRepo() *Repo {
	return &Repo{parent: map[string]string{}, trees: map[string]map[string][]byte{}, branches: map[string]string{}}
}

// Commit adds a commit on branch (created from main's head when new) whose
// tree is the parent's with files applied ("" deletes), and returns it.
func (r *Repo) Commit(branch string, files map[string]string) string {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	parent, ok := r.branches[branch]
	if !ok {
		parent = r.branches["main"]
	}
	tree := maps.Clone(r.trees[parent])
	if tree == nil {
		tree = map[string][]byte{}
	}
	for p, c := range files {
		if c == "" {
			delete(tree, p)
		} else {
			tree[p] = []byte(c)
		}
	}
	return r.add(branch, parent, tree)
}

func (r *Repo) add(branch, parent string, tree map[string][]byte) string {
	r.n++
	sum := sha1.Sum(fmt.Appendf(nil, "commit %d", r.n))
	h := hex.EncodeToString(sum[:])
	r.parent[h], r.trees[h], r.branches[branch] = parent, tree, h
	return h
}

func (r *Repo) DeleteBranch(name string) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	delete(r.branches, name)
}

// Fetches counts the Fetch calls: a loop's pass fetches once, so a count
// two past a mark means a pass started after the mark completed.
func (r *Repo) Fetches() int {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.fetches
}

func (r *Repo) SetFetchErr(err error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.fetchErr = err
}

func (r *Repo) Fetch(ctx context.Context) (*gitsource.Refs, error) {
	r.Mu.Lock()
	block := r.Block
	r.Mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, &gitsource.RemoteError{Op: "fetch", Reason: gitsource.ReasonCanceled, Msg: "canceled"}
		}
	}
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.fetches++
	if r.fetchErr != nil {
		return nil, r.fetchErr
	}
	refs := &gitsource.Refs{Branches: map[string]gitsource.Revision{}, Pulls: map[int]gitsource.Revision{}}
	for name, h := range r.branches {
		refs.Branches[name] = gitsource.Revision{Ref: name, Hash: h}
	}
	refs.Main = refs.Branches["main"]
	for n, h := range r.Pulls {
		refs.Pulls[n] = gitsource.Revision{Ref: fmt.Sprintf("refs/pull/%d/head", n), Hash: h}
	}
	return refs, nil
}

func (r *Repo) Commits(from, head string, max int) ([]string, error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if from == head {
		return nil, nil
	}
	var back []string
	for h := head; h != "" && len(back) < max; h = r.parent[h] {
		if h == from {
			for i, j := 0, len(back)-1; i < j; i, j = i+1, j-1 {
				back[i], back[j] = back[j], back[i]
			}
			return back, nil
		}
		back = append(back, h)
	}
	return []string{head}, nil
}

func (r *Repo) Files(commit string) (map[string][]byte, error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.filesRead++
	t, ok := r.trees[commit]
	if !ok {
		return nil, fmt.Errorf("%w: %s", gitsource.ErrUnknownRevision, commit)
	}
	return t, nil
}

func (r *Repo) ChangedPolicies(from, to string) ([]string, error) {
	a, err := r.Files(from)
	if err != nil {
		return nil, err
	}
	b, err := r.Files(to)
	if err != nil {
		return nil, err
	}
	return gitsource.ChangedPoliciesFS(gitsource.FilesFS(a), gitsource.FilesFS(b), r.lopts)
}

func (r *Repo) Revert(_ context.Context, req gitsource.RevertRequest) (string, error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.Reverts = append(r.Reverts, req)
	if r.PushErr != nil {
		return "", r.PushErr
	}
	tree, ok := r.trees[req.ToHash]
	if !ok {
		return "", gitsource.ErrUnknownRevision
	}
	head := r.branches["main"]
	if maps.EqualFunc(tree, r.trees[head], func(a, b []byte) bool { return string(a) == string(b) }) {
		return head, gitsource.ErrNoChange
	}
	return r.add("main", head, tree), nil
}

// Parent is commit's first parent ("" for a root), as the repository
// records it.
func (r *Repo) Parent(commit string) string {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.parent[commit]
}
