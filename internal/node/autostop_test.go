package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/config"
)

// stoppedAnswer is the part of an experiment an auto-stop changes.
type stoppedAnswer struct {
	AutoStop        map[string]any `json:"autoStop"`
	PreviewMetadata *struct {
		State      string `json:"state"`
		StopReason string `json:"stopReason"`
	} `json:"previewMetadata"`
}

// TestExperimentAutoStops: an experiment created with autoStop.requests
// is SUSPENDED by the leader, with the reason, once the cluster's merged
// counts reach it; one without autoStop gets the configured default
// duration.
func TestExperimentAutoStops(t *testing.T) {
	defaults := func(cfg *config.Config) { cfg.Preview.AutoStopAfter = config.Duration{Duration: 2 * time.Second} }
	c := newTestCluster(t)
	c.start("n1", defaults)
	c.start("n2", defaults)
	all := []string{"n1", "n2"}
	c.allServe(1, all...)
	f := followerOf(c.leader(all...), all)
	base := c.base(f) + "/v1/policies/web/experiments"
	body := func(auto string) string {
		return `{"policy":{"default_action":"deny","rules":[{"name":"h","priority":1,"action":"allow","match":"request.path == \"/healthz\""}]}` +
			auto + `}`
	}
	var op operationAnswer
	if code := call(t, http.MethodPost, base+"?experimentId=counted", body(`,"autoStop":{"requests":6,"duration":"3600s"}`), &op); code != 200 || op.Error != nil {
		t.Fatalf("create: %d %+v", code, op)
	}
	var e struct{ Error struct{ Message string } }
	if code := call(t, http.MethodPost, base+"?experimentId=bad", body(`,"autoStop":{"duration":"-5s"}`), &e); code != 400 ||
		!strings.Contains(e.Error.Message, "autoStop.duration") {
		t.Errorf("a negative duration: %d %+v", code, e)
	}
	c.previewing("web", all...)
	c.allowV1(3, all...) // /v1 and /healthz: 12 requests, 6 wanted
	exp := waitStopped(t, base+"/counted", "requests (autoStop.requests 6)")
	if exp.AutoStop["duration"] != "3600s" {
		t.Errorf("autoStop = %v", exp.AutoStop)
	}
	if code := call(t, http.MethodPost, base+"?experimentId=timed", body(""), &op); code != 200 || op.Error != nil {
		t.Fatalf("create: %d %+v", code, op)
	}
	waitStopped(t, base+"/timed", "auto-stopped after 2s (autoStop.duration)")
}

// waitStopped waits until the experiment at url is SUSPENDED with a stop
// reason holding reason.
func waitStopped(t *testing.T, url, reason string) stoppedAnswer {
	t.Helper()
	var exp stoppedAnswer
	eventually(t, waitTimeout, url+" "+reason, func() error {
		exp = stoppedAnswer{}
		call(t, http.MethodGet, url, "", &exp)
		if exp.PreviewMetadata == nil || exp.PreviewMetadata.State != "SUSPENDED" || !strings.Contains(exp.PreviewMetadata.StopReason, reason) {
			return fmt.Errorf("experiment = %+v", exp.PreviewMetadata)
		}
		return nil
	})
	return exp
}
