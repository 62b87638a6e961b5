package nodes_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

type healthAnswer struct {
	Nodes []struct {
		ID, Healthy string
		Reasons     []string
	} `json:"nodes"`
}

func (a healthAnswer) String() string {
	var b strings.Builder
	for _, n := range a.Nodes {
		fmt.Fprintf(&b, "%s=%s%v ", n.ID, n.Healthy, n.Reasons)
	}
	return b.String()
}

// TestHealthCheck: healthy nodes say so, a paused node is reported
// unreachable within the deadline, and a leader that cannot read git is
// not healthy, with the reason.
func TestHealthCheck(t *testing.T) {
	e := start(t)
	n1, n2, n3 := e.node("n1"), e.node("n2"), e.node("n3")
	e.eventually("every default node healthy", func() error {
		var a healthAnswer
		if code := e.post(n2, "/v1/nodes:healthCheck", `{"group":"default"}`, &a); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		if a.String() != "n1=HEALTHY[] n2=HEALTHY[] n3=HEALTHY[] " {
			return fmt.Errorf("%s", a)
		}
		return nil
	})

	if err := n3.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.eventually("n3 stopped", func() error {
		if !n3.Stopped() {
			return fmt.Errorf("n3 still running")
		}
		return nil
	})
	var a healthAnswer
	code := e.post(n1, "/v1/nodes:healthCheck", `{"name":"n3"}`, &a)
	_ = n3.Signal(syscall.SIGCONT)
	if code != 200 || len(a.Nodes) != 1 || a.Nodes[0].Healthy != "UNREACHABLE" {
		t.Fatalf("paused n3: %d %s", code, a)
	}

	leader := e.c.WaitLeader(30 * time.Second)
	e.git.Down()
	e.post(n1, "/v1/cluster:reconcile", "{}", nil)
	e.eventually("the leader reports git unreachable", func() error {
		var a healthAnswer
		e.post(n2, "/v1/nodes:healthCheck", `{"name":"`+leader.ID+`"}`, &a)
		if len(a.Nodes) != 1 || a.Nodes[0].Healthy != "NOT_HEALTHY" || !strings.Contains(strings.Join(a.Nodes[0].Reasons, ";"), "git source") {
			return fmt.Errorf("%s", a)
		}
		return nil
	})
	e.git.Up()
}
