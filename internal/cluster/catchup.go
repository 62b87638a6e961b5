package cluster

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// Read-your-writes through any node: the leader's answer to a forwarded
// write carries the raft index its state had reached once the work was
// done (AppliedIndexHeader), and the node that forwarded it returns only
// once it has applied that index too, so that its client reads the write
// back from the node it wrote through. Both ways to the leader (OnLeader
// for the API's writes, viaLeader for the cluster's own) wait here.

// AppliedIndexHeader carries, on the leader's answer to a forwarded
// write, the raft index its state had reached once the work was done, so
// that the node that forwarded it can wait to have applied it too before
// it answers its client.
const AppliedIndexHeader = "X-Reconciler-Applied-Index"

// MaxCatchUp bounds the wait of a node that forwarded a write for its
// own state to reach the leader's: a follower cut off from the leader
// answers anyway, and an index far ahead costs one request this long.
const MaxCatchUp = 2 * time.Second

// catchUp waits, at most MaxCatchUp and while ctx lasts, until this node
// has applied index (0: nothing to wait for). It answers anyway then: the
// wait serves the client's next read, not the write, which is done.
func (f *forwarder) catchUp(ctx context.Context, index uint64) {
	if f.store.State().LastIndex >= index {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, MaxCatchUp)
	defer cancel()
	_ = f.store.WaitForIndex(ctx, index)
}

// ForwardedWriteDone is the leader's last step of a write another node
// forwarded, since being its state's raft index before the write: it
// returns the index its state reached, for the answer to report
// (AppliedIndexHeader), and when that moved past since has raft send the
// followers the commit index now (Store.SendCommit) rather than at the
// next commit timeout, so the node that forwarded applies the write about
// one round trip after the answer instead of 50 to 100 ms later. A call
// that wrote nothing (a read, a refusal, a change to what already was)
// costs no raft entry.
func (c *Cluster) ForwardedWriteDone(since uint64) uint64 {
	index := c.store.State().LastIndex
	if index > since {
		c.store.SendCommit()
	}
	return index
}

// answered is what the node that forwarded learns from resp beyond its
// body: the index the answer reports and, with TLS, the node id the
// server's certificate names ("" when it names none).
func answered(resp *http.Response) (index uint64, from string) {
	index, _ = strconv.ParseUint(resp.Header.Get(AppliedIndexHeader), 10, 64)
	if resp.TLS != nil {
		from, _ = tlsconfig.PeerID(resp.TLS)
	}
	return index, from
}

// trusted is the index the answer of leader id reports, from the server
// named from, that this node may wait for: with node-to-node TLS only
// when the server's certificate names that leader, so that no other
// server decides how long this node holds its client (the index can
// only make it wait, bounded, never skip a wait). Without TLS the address
// raft registered for the leader is all there is to trust.
func (f *forwarder) trusted(index uint64, from, id string) uint64 {
	if f.peerTLS && from != id {
		return 0
	}
	return index
}
