// Package raftstore is the replicated state of a reconciler cluster:
// generations of policy bundles and their promotion, the node registry,
// experiments and operations, and the leader's records (source status,
// branches, pull requests, comment command claims), one table each, kept
// identical on every node by hashicorp/raft.
//
// Layers, from the inside out:
//
//   - Command and the payload types: a versioned JSON envelope, validated
//     before it reaches the log (NewCommand) and again when applied; Txn
//     applies several as one entry, all or none.
//   - State: a plain value; Applier applies a Command to it with no raft,
//     clock or lock, so tests and recovery tools can drive it.
//   - FSM: the raft.FSM adapter. Copy-on-write: each apply publishes a new
//     immutable *State, and subscribers get a coalescing signal.
//   - Store: raft with bolt storage, file snapshots and TCP transport;
//     Open restores the last committed state from disk before returning.
//
// See DESIGN.md beside this file for the decisions behind it.
package raftstore
