// Package reconcile is the leader loop: it reads the newest policies tree
// from a TreeSource, skips it when the replicated state already knows its
// revision, validates it (load, compile, run every policy test), stages it
// as the next generation through raft, and activates the staged generation
// once every reachable node has reported Ready (two-phase promotion). An
// invalid tree is recorded as an INVALID generation and the active one
// keeps serving. The loop runs only on the leader; a new leader resumes
// from the replicated state.
//
// It does no compiling for serving and no I/O besides its source: nodes
// compile staged generations themselves (see internal/node).
package reconcile
