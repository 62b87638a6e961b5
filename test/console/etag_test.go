package console_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// statusAnswers304: a console polling /v1/status of a cluster where
// nothing happens gets 304s, although every heartbeat moves the times the
// status carries: after a heartbeat that the answer without a tag shows,
// the tag of the status before it still matches.
func statusAnswers304(t *testing.T, c *harness.Cluster, n *harness.Node) {
	t.Helper()
	harness.WaitFor(t, 60*time.Second, "a 304 from /v1/status across a heartbeat", func() error {
		tag, beats, err := statusTag(n, "")
		if err != nil {
			return err
		}
		harness.WaitFor(t, 30*time.Second, "a heartbeat", func() error {
			if _, now, err := statusTag(n, ""); err != nil || now == beats {
				return fmt.Errorf("heartbeats %s, %v", now, err)
			}
			return nil
		})
		code, _, err := statusTag(n, tag)
		if err != nil || code != "304" {
			return fmt.Errorf("GET /v1/status with If-None-Match %s after a heartbeat: %s %v", tag, code, err)
		}
		return nil
	})
}

// statusTag GETs /v1/status (with If-None-Match when tag is set) and
// returns the ETag, or the status code when it is 304, and the nodes'
// heartbeat times.
func statusTag(n *harness.Node, tag string) (string, string, error) {
	req, err := http.NewRequest(http.MethodGet, n.Base()+"/v1/status", nil)
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+readerToken)
	if tag != "" {
		req.Header.Set("If-None-Match", tag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		return "304", "", nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return "", "", fmt.Errorf("HTTP %d %s %v", resp.StatusCode, body, err)
	}
	var st struct {
		Nodes []struct {
			LastHeartbeat time.Time `json:"lastHeartbeat"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return "", "", err
	}
	return resp.Header.Get("ETag"), fmt.Sprint(st.Nodes), nil
}
