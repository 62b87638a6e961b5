// Package cluster is the part of a node that deals with the other nodes:
// the one way to reach the leader (OnLeader: a call is run locally and,
// on raftstore.ErrNotLeader, sent once to the leader with a deadline: to
// its HTTP address, or with mutual TLS to its raft address, the
// node-to-node port; raft proposals retry through the same layer, all
// over Config.Client), membership (join, leave, rejoin after a restart), heartbeats
// kept in the leader's memory, and leadership (running the leader loop
// only while this node leads).
//
// It is also the leader's side of node management, after ONAP's PAP:
// node states set by changeState (states.go), the PDP_STATUS each
// heartbeat carries (status.go), failed nodes (failures.go), health checks
// fanned out to the nodes in scope (health.go), nodes held PASSIVE at join
// (consistency.go) and nodes left behind past the staging timeout
// (staging.go) or because they do not follow the raft log although they
// heartbeat (follow.go).
//
// Errors keep their identity across the wire: every sentinel error of this
// package and of raftstore has a name (Reason) that the API puts into the
// AIP-193 error body, and the forwarding client turns it back into a
// *RemoteError that matches the same sentinel with errors.Is.
//
// With mutual TLS (Config.PeerTLS) a request from another node carries
// that node's verified id (WithPeer, peers.go): reports, heartbeats and
// address changes are accepted only from the node they speak for.
//
// The package knows nothing of policies or of serving decisions; see
// docs/cluster.md for how a node puts it together with raftstore, the
// node loader and the leader loop.
package cluster
