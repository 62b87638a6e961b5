// Package raftstore is the replicated state of a reconciler cluster:
// generations of policy bundles and their promotion, the node registry,
// experiments and operations, kept identical on every node by
// hashicorp/raft.
//
// Layers, from the inside out:
//
//   - Command and the payload types: a versioned JSON envelope, validated
//     before it reaches the log (NewCommand) and again when applied.
//   - State: a plain value; Applier applies a Command to it with no raft,
//     clock or lock, so tests and recovery tools can drive it.
//   - FSM: the raft.FSM adapter. Copy-on-write: each apply publishes a new
//     immutable *State, and subscribers get a coalescing signal.
//   - Store: raft with bolt storage, file snapshots and TCP transport;
//     Open restores the last committed state from disk before returning.
//
// See DESIGN.md beside this file for the decisions behind it.
package raftstore
