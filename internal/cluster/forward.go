package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// maxAnswerBytes bounds what the forwarding client reads of an answer.
const maxAnswerBytes = 4 << 20

// forwarder sends a write this node cannot do itself to the leader: the
// one forwarding layer (rqlite's proxy, consul's ForwardRPC). The leader's
// HTTP address comes from the raft leader id and the replicated node
// registry; a node that knows neither (it is still joining) asks one of
// its join addresses, which forwards once more.
type forwarder struct {
	self      string
	store     Store
	client    *http.Client
	token     string
	joinAddrs []string
	timeout   time.Duration
	// peerTLS sends to raft addresses over mutual TLS (Config.PeerTLS).
	peerTLS bool
}

// errLeadsNow stops a forward because this node has become the leader
// meanwhile (an election it won while the request waited for one), so
// that viaLeader runs the request here instead of forwarding to itself
// until the deadline.
var errLeadsNow = errors.New("this node leads now")

// call POSTs in as JSON to path on the leader and decodes the answer into
// out (when not nil). While the leader is changing or unreachable it
// retries with backoff until the forward deadline; other errors return at
// once. Errors match the sentinels they name (see Reason).
func (f *forwarder) call(ctx context.Context, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	delay := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var index uint64
		index, err = f.try(ctx, attempt, path, body, out)
		if err == nil {
			f.catchUp(ctx, index) // catchup.go: what it answers is visible here
		}
		if err == nil || !retryable(err) {
			return err
		}
		if errors.Is(err, raftstore.ErrNotLeader) && f.store.IsLeader() {
			return errLeadsNow // elected while waiting: viaLeader runs the request here
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %d attempts: %v)", err, attempt+1, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// try posts once and returns the applied index the leader's answer
// reports (0 from a join address: not the leader's own answer).
func (f *forwarder) try(ctx context.Context, attempt int, path string, body []byte, out any) (uint64, error) {
	addr, leader, err := f.target(attempt)
	if err != nil {
		return 0, err
	}
	index, from, err := f.post(ctx, addr, leader != "", path, body, out)
	if leader == "" {
		return 0, err
	}
	return f.trusted(index, from, leader), err
}

// target picks where to send: the leader when its address is known
// (leader is its id), else a join address, rotating between attempts.
func (f *forwarder) target(attempt int) (addr, leader string, err error) {
	id, _ := f.store.Leader()
	if id == f.self {
		// Raft names this node but it is not (or no longer) leading:
		// a transition. Retry shortly.
		return "", "", raftstore.ErrNotLeader
	}
	if addr, ok := f.leaderAddr(id); ok {
		return addr, id, nil
	}
	if len(f.joinAddrs) > 0 {
		return f.joinAddrs[attempt%len(f.joinAddrs)], "", nil
	}
	if id != "" {
		return "", "", fmt.Errorf("%w: leader %s has no registered HTTP address yet", ErrNoLeader, id)
	}
	return "", "", fmt.Errorf("%w and node.join is empty", ErrNoLeader)
}

// post sends body to addr and decodes a 2xx answer into out; index and
// from are what the answer reports beyond its body (answered).
func (f *forwarder) post(ctx context.Context, addr string, direct bool, path string, body []byte,
	out any) (index uint64, from string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.baseURL(addr)+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s: %v", ErrForward, addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if direct {
		req.Header.Set(ForwardedHeader, f.self)
	}
	token := f.token
	if f.peerTLS {
		token = "" // nodes prove who they are with their certificates
	}
	if auth := credential(ctx, token); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s%s: %v", ErrForward, addr, path, TransportCause(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s%s: reading the answer: %v", ErrForward, addr, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return 0, "", DecodeError(resp.StatusCode, data, addr)
	}
	index, from = answered(resp)
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return index, from, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, "", fmt.Errorf("%w: %s%s: bad answer: %v", ErrForward, addr, path, err)
	}
	return index, from, nil
}

// leaderAddr is where to reach leader id for node-to-node calls: its raft
// address (the node-to-node TLS port) with peerTLS, as raft itself knows
// it, else its registered HTTP address.
func (f *forwarder) leaderAddr(id string) (string, bool) {
	if id == "" {
		return "", false
	}
	if f.peerTLS {
		lid, addr := f.store.Leader()
		return addr, lid == id && addr != ""
	}
	n, ok := f.store.State().Nodes[id]
	return n.HTTPAddr, ok && n.HTTPAddr != ""
}

func (f *forwarder) baseURL(addr string) string {
	if f.peerTLS {
		return "https://" + addr
	}
	return "http://" + addr
}

// viaLeader runs local when this node leads, and otherwise (or when local
// finds it no longer leads) forwards in to path on the leader and decodes
// the answer into out; it runs local after all when this node is elected
// while the forward waits for a leader. A forwarded request is never
// forwarded again, and another node's own call (WithPeer) is not forwarded at all: the node is
// pointed to the leader (LeaderElsewhere), so that its own certificate
// speaks for it there.
func (f *forwarder) viaLeader(ctx context.Context, path string, in, out any, local func() error) error {
	if f.store.IsLeader() {
		err := local()
		if !errors.Is(err, raftstore.ErrNotLeader) {
			return err
		}
	}
	if IsForwarded(ctx) {
		id, _ := f.store.Leader()
		return fmt.Errorf("%w: %s received a forwarded request but the leader is %q", raftstore.ErrNotLeader,
			f.self, id)
	}
	if peer, ok := PeerFrom(ctx); ok && peer != f.self {
		return f.leaderElsewhere() // a node's own call is never relayed under this node's certificate
	}
	if err := f.call(ctx, path, in, out); !errors.Is(err, errLeadsNow) {
		return err
	}
	return local()
}

// LeaderURL is the base URL ("https://host:port") of the leader for
// node-to-node calls when it is another node, for the API's forwarding
// of user requests; false when this node leads or no leader is known.
func (c *Cluster) LeaderURL() (string, bool) {
	_, base, ok := c.fwd.leaderBase()
	return base, ok
}

// leaderBase is the leader's id and base URL when it is another node.
func (f *forwarder) leaderBase() (id, base string, ok bool) {
	id, _ = f.store.Leader()
	if id == f.self {
		return "", "", false
	}
	addr, ok := f.leaderAddr(id)
	if !ok {
		return "", "", false
	}
	return id, f.baseURL(addr), true
}

// TransportCause drops the URL that net/http puts around transport errors
// ("Post URL: ..."); the caller names the address itself.
func TransportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// errorBody is the AIP-193 error answer, with the ErrorInfo detail the API
// adds for errors that have a wire name.
type errorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Details []struct {
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"details"`
	} `json:"error"`
}

// DecodeError turns a node's error answer into a *RemoteError. An answer
// that is not an AIP-193 body (a proxy, another program on the port) is
// ErrForward. The CLI reads the API's errors with it too.
func DecodeError(code int, data []byte, addr string) error {
	var b errorBody
	if err := json.Unmarshal(data, &b); err != nil || b.Error.Status == "" {
		return fmt.Errorf("%w: %s answered HTTP %d without an API error", ErrForward, addr, code)
	}
	reason := ""
	for _, d := range b.Error.Details {
		if d.Domain == ErrorDomain {
			reason = d.Reason
			break
		}
	}
	return newRemoteError(code, b.Error.Status, b.Error.Message, reason)
}
