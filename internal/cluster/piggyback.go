package cluster

import (
	"encoding/json"
	"time"
)

// PayloadTTL is how long the leader keeps counting a node's last payload
// after its last heartbeat: long enough that a node missing a few beats
// does not make the merged numbers jump, short enough that a node gone for
// good stops counting.
const PayloadTTL = 2 * time.Minute

// Piggyback lets another subsystem ride on the heartbeats instead of
// running a second periodic exchange with the leader: every node sends
// Outgoing with each heartbeat, the leader merges the latest payload of
// every node heard from within PayloadTTL, and every node adopts the merge
// from the heartbeat answer (the leader from its own). Preview stats use
// it. Implementations must be safe for concurrent use and cheap: Merge runs
// on the leader for every heartbeat it answers.
type Piggyback interface {
	Outgoing() json.RawMessage
	Merge(payloads map[string]json.RawMessage) json.RawMessage
	Adopt(merged json.RawMessage)
}

// SetPiggyback installs p; call it before RunHeartbeats.
func (c *Cluster) SetPiggyback(p Piggyback) { c.views.pb.Store(&p) }

func (vb *viewBuilder) piggyback() Piggyback {
	if p := vb.pb.Load(); p != nil {
		return *p
	}
	return nil
}
