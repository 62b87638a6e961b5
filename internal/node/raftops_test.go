package node

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// peersAnswer is GET /v1/raft/peers.
type peersAnswer struct {
	Leader string `json:"leader"`
	Peers  []struct {
		ID        string `json:"id"`
		Address   string `json:"address"`
		Suffrage  string `json:"suffrage"`
		Leader    bool   `json:"leader"`
		Reachable bool   `json:"reachable"`
	} `json:"peers"`
}

// apiError is an AIP-193 answer.
type apiError struct {
	Error struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestRaftOperatorEndpoints runs three real raft nodes: the peer list
// (asked of a follower, answered by the leader) shows every voter with
// its address and the leader; a transfer through a follower moves
// leadership, to the named voter or to the one raft picks; removing a
// running voter is refused, and once it is stopped removing it drops it
// from the configuration and the registry.
func TestRaftOperatorEndpoints(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	c.start("n1", nil)
	c.allServe(1, "n1")
	c.start("n2", nil)
	c.start("n3", nil)
	all := []string{"n1", "n2", "n3"}
	c.allServe(1, all...)
	leader := c.leader(all...)
	follower := followerOf(leader, all)

	var peers peersAnswer
	eventually(t, waitTimeout, "three reachable voters in /v1/raft/peers", func() error {
		if code := call(t, http.MethodGet, c.base(follower)+"/v1/raft/peers", "", &peers); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		var got []string
		for _, p := range peers.Peers {
			if p.Address != c.nodes[p.ID].Store().Addr() || p.Leader != (p.ID == leader) || !p.Reachable {
				return fmt.Errorf("peer %+v", p)
			}
			got = append(got, p.ID+"="+p.Suffrage)
		}
		if slices.Sort(got); !slices.Equal(got, []string{"n1=VOTER", "n2=VOTER", "n3=VOTER"}) || peers.Leader != leader {
			return fmt.Errorf("peers %v led by %q", got, peers.Leader)
		}
		return nil
	})

	// A named transfer, sent to a follower: the target leads.
	target := followerOf(leader, slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == follower }))
	var moved struct{ From, Leader string }
	if code := call(t, http.MethodPost, c.base(follower)+"/v1/raft:transferLeadership", fmt.Sprintf(`{"id":%q}`, target), &moved); code != 200 {
		t.Fatalf("transfer to %s = %d %+v", target, code, moved)
	}
	if now := c.leader(all...); now != target || moved.From != leader {
		t.Fatalf("after the transfer to %s: leader %s, answer %+v", target, now, moved)
	}
	// An unnamed one: raft picks another voter.
	if code := call(t, http.MethodPost, c.base(target)+"/v1/raft:transferLeadership", "{}", &moved); code != 200 {
		t.Fatalf("transfer = %d", code)
	}
	eventually(t, waitTimeout, "a leader other than "+target, func() error {
		if now := c.leader(all...); now == target {
			return fmt.Errorf("%s still leads", now)
		}
		return nil
	})
	leader = c.leader(all...)
	victim := followerOf(leader, all)

	var e apiError
	if code := call(t, http.MethodPost, c.base(victim)+"/v1/raft:removePeer", fmt.Sprintf(`{"id":%q}`, victim), &e); code != 400 ||
		e.Error.Status != "FAILED_PRECONDITION" {
		t.Fatalf("removing a running voter = %d %+v", code, e)
	}
	c.stop(victim)
	rest := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == victim })
	asked := followerOf(leader, rest)
	eventually(t, waitTimeout, "the removal of the stopped "+victim, func() error {
		code, data, err := tryCall(http.MethodPost, c.base(asked)+"/v1/raft:removePeer", fmt.Sprintf(`{"id":%q}`, victim))
		if err == nil && code != 200 {
			err = fmt.Errorf("HTTP %d: %s", code, data)
		}
		return err
	})
	if got := servers(t, c.nodes[leader]); slices.ContainsFunc(got, func(s string) bool { return s == victim+"=Voter" }) || len(got) != 2 {
		t.Errorf("servers after the removal: %v", got)
	}
	if _, ok := c.nodes[leader].Store().State().Nodes[victim]; ok {
		t.Errorf("%s is still registered", victim)
	}
}
