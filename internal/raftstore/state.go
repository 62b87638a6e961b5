package raftstore

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// GenerationState is the lifecycle state of a generation (Kubewarden's
// Pending/Valid/Invalid/Active, seen from the replicated log).
type GenerationState string

// Generation states.
const (
	// GenerationStaged: files are in the log, nodes are compiling them.
	GenerationStaged GenerationState = "STAGED"
	// GenerationActive: the generation every node serves.
	GenerationActive GenerationState = "ACTIVE"
	// GenerationRetired: was active, replaced by a newer one. The most
	// recent retired generation is State.Previous and keeps its files.
	GenerationRetired GenerationState = "RETIRED"
	// GenerationSuperseded: a newer Stage arrived before activation.
	GenerationSuperseded GenerationState = "SUPERSEDED"
	// GenerationInvalid: a node or the leader reported errors; never
	// activated.
	GenerationInvalid GenerationState = "INVALID"
)

// NodeState is a node's administrative state (ONAP PDP states).
type NodeState string

// Node states; DESIGN.md in /work/shared says what each means for decisions.
const (
	NodeActive     NodeState = "ACTIVE"
	NodeTest       NodeState = "TEST"
	NodeSafe       NodeState = "SAFE"
	NodePassive    NodeState = "PASSIVE"
	NodeTerminated NodeState = "TERMINATED"
)

// Valid reports whether s is one of the node states.
func (s NodeState) Valid() bool {
	switch s {
	case NodeActive, NodeTest, NodeSafe, NodePassive, NodeTerminated:
		return true
	}
	return false
}

// HistoryLimit bounds how many generation records State keeps. The active,
// previous and staged generations are never pruned.
const HistoryLimit = 50

// Generation is one promoted (or attempted) policies tree.
type Generation struct {
	Number uint64          `json:"number"`
	State  GenerationState `json:"state"`
	Commit string          `json:"commit"`
	// Etags maps policy name to etag.
	Etags map[string]string `json:"etags"`
	// Files is the bundle; nil once the generation can no longer be
	// served (superseded, invalid, or older than Previous).
	Files map[string][]byte `json:"files"`
	// Chunked lists the chunk hashes of each file of a generation staged
	// in chunks (State.Chunks holds them while Files is kept).
	Chunked map[string][]string `json:"chunked,omitempty"`
	// CreateTime is when it was staged (or marked invalid).
	CreateTime time.Time `json:"createTime"`
	// ActivateTime is when it became active, zero if never.
	ActivateTime time.Time `json:"activateTime,omitzero"`
	// StateTime is when State last changed.
	StateTime time.Time `json:"stateTime"`
	// ReadyNodes maps node id to the time it reported Ready.
	ReadyNodes map[string]time.Time `json:"readyNodes"`
	// NodeErrors maps node id to its compile errors.
	NodeErrors map[string][]string `json:"nodeErrors"`
	// LeaderErrors are leader-side failures recorded by MarkInvalid.
	LeaderErrors []string `json:"leaderErrors"`
	// History is the commit's author and rollback, from a version 3
	// Stage; empty before. Snapshots decode leniently, so 1.0.0 reading
	// one drops it rather than refusing.
	History
}

// Node is a registered cluster member (a PDP in ONAP terms).
type Node struct {
	ID         string    `json:"id"`
	RaftAddr   string    `json:"raftAddr"`
	HTTPAddr   string    `json:"httpAddr"`
	Group      string    `json:"group"`
	Subgroup   string    `json:"subgroup"`
	Voter      bool      `json:"voter"`
	State      NodeState `json:"state"`
	JoinTime   time.Time `json:"joinTime"`
	UpdateTime time.Time `json:"updateTime"`
}

// Experiment is an AIP-236 experiment document, opaque here: the preview
// package owns its content.
type Experiment struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
	// Lists are the chunks of the list files the experiment changes, by
	// list content hash (PutExperiment version 2).
	Lists map[string][]string `json:"lists,omitempty"`
}

// Operation is an opaque long-running operation document.
type Operation struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data,omitempty"`
}

// State is the whole replicated state. It is a plain value: the FSM never
// mutates a State it has published, so a *State from FSM.State is safe to
// read from any goroutine, and must never be modified by readers. Bundle
// maps (Generation.Files) and byte slices (files, stats, documents) are
// shared between clones and never modified in place by anyone.
type State struct {
	Generations map[uint64]Generation `json:"generations"`
	// Active, Previous and Staged are generation numbers, 0 for none.
	Active   uint64 `json:"active"`
	Previous uint64 `json:"previous"`
	Staged   uint64 `json:"staged"`
	// Highest is the highest generation number ever recorded, which
	// survives pruning so numbers keep growing.
	Highest uint64          `json:"highest"`
	Nodes   map[string]Node `json:"nodes"`
	// Experiments holds the AIP-236 experiments by resource name
	// "policies/{policy}/experiments/{id}", and nothing else.
	Experiments map[string]Experiment `json:"experiments"`
	// Operations holds the long-running operations by id.
	Operations map[string]Operation `json:"operations"`
	// Dismissed holds the branch and pull request experiments deleted
	// through the API, by experiment name (dismissals.go).
	Dismissed map[string]Dismissal `json:"dismissed,omitempty"`
	// Sources holds the status of each failing policy source, by source
	// name (SourceGit).
	Sources map[string]SourceStatus `json:"sources"`
	// Branches holds the branches other than the live one, by name
	// (without GitHub, the experiment sources).
	Branches map[string]BranchRecord `json:"branches"`
	// Pulls holds the open pull requests into the live branch, by number.
	Pulls map[int]PullRecord `json:"pulls"`
	// Claims holds the comment commands the leader ran, by comment id.
	Claims map[int64]CommandClaim `json:"claims"`
	// Chunks holds the chunks of chunked generations by ChunkHash
	// (chunks.go).
	Chunks map[string]Chunk `json:"chunks,omitempty"`
	// LastIndex is the raft index of the last command applied.
	LastIndex uint64 `json:"lastIndex"`
}

// NewState returns an empty state with its maps allocated.
func NewState() *State {
	return &State{
		Generations: map[uint64]Generation{},
		Nodes:       map[string]Node{},
		Experiments: map[string]Experiment{},
		Operations:  map[string]Operation{},
		Dismissed:   map[string]Dismissal{},
		Sources:     map[string]SourceStatus{},
		Branches:    map[string]BranchRecord{},
		Pulls:       map[int]PullRecord{},
		Claims:      map[int64]CommandClaim{},
	}
}

// Clone returns a copy that shares no mutable map or slice with s; only
// the immutable bundle maps and byte contents are shared.
func (s *State) Clone() *State {
	c := *s
	c.Generations = make(map[uint64]Generation, len(s.Generations))
	for n, g := range s.Generations {
		c.Generations[n] = g.clone()
	}
	c.Nodes = maps.Clone(s.Nodes)
	c.Experiments = maps.Clone(s.Experiments)
	c.Operations = maps.Clone(s.Operations)
	c.Dismissed = maps.Clone(s.Dismissed)
	// Records are replaced whole, never modified in place, so their
	// slices and maps are shared like the documents' bytes.
	c.Sources = maps.Clone(s.Sources)
	c.Branches = maps.Clone(s.Branches)
	c.Pulls = maps.Clone(s.Pulls)
	c.Claims = maps.Clone(s.Claims)
	c.Chunks = maps.Clone(s.Chunks)
	return &c
}

func (g Generation) clone() Generation {
	g.Etags = maps.Clone(g.Etags)
	// Files is shared, not copied: a bundle map is never written after
	// Stage (pruning replaces it with nil), and copying it on every apply
	// would dominate the cost of small commands.
	g.ReadyNodes = maps.Clone(g.ReadyNodes)
	g.LeaderErrors = slices.Clone(g.LeaderErrors)
	if g.NodeErrors != nil {
		errs := make(map[string][]string, len(g.NodeErrors))
		for id, e := range g.NodeErrors {
			errs[id] = slices.Clone(e)
		}
		g.NodeErrors = errs
	}
	return g
}

// Generation returns generation n.
func (s *State) Generation(n uint64) (Generation, bool) {
	g, ok := s.Generations[n]
	return g, ok
}

// ActiveGeneration returns the generation every node should serve.
func (s *State) ActiveGeneration() (Generation, bool) { return s.lookup(s.Active) }

// PreviousGeneration returns the generation active before the current one,
// still with its files (for requests pinned to it).
func (s *State) PreviousGeneration() (Generation, bool) { return s.lookup(s.Previous) }

// StagedGeneration returns the generation waiting for Ready reports.
func (s *State) StagedGeneration() (Generation, bool) { return s.lookup(s.Staged) }

func (s *State) lookup(n uint64) (Generation, bool) {
	if n == 0 {
		return Generation{}, false
	}
	return s.Generation(n)
}

// GenerationNumbers returns the known generation numbers, oldest first.
func (s *State) GenerationNumbers() []uint64 {
	return slices.Sorted(maps.Keys(s.Generations))
}

// normalize allocates maps a decoder may have left nil, so the applier
// can write into a restored state.
func (s *State) normalize() {
	if s.Generations == nil {
		s.Generations = map[uint64]Generation{}
	}
	if s.Nodes == nil {
		s.Nodes = map[string]Node{}
	}
	if s.Experiments == nil {
		s.Experiments = map[string]Experiment{}
	}
	if s.Operations == nil {
		s.Operations = map[string]Operation{}
	}
	if s.Dismissed == nil {
		s.Dismissed = map[string]Dismissal{}
	}
	if s.Sources == nil {
		s.Sources = map[string]SourceStatus{}
	}
	if s.Branches == nil {
		s.Branches = map[string]BranchRecord{}
	}
	if s.Pulls == nil {
		s.Pulls = map[int]PullRecord{}
	}
	if s.Claims == nil {
		s.Claims = map[int64]CommandClaim{}
	}
}
