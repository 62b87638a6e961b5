package preview_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
)

func TestAutoStopDue(t *testing.T) {
	t.Parallel()
	e := start(t, create(t, nil, "e", webPolicy()), at(0))
	def := preview.AutoStop{Duration: preview.Duration{D: time.Hour}}
	if r := preview.AutoStopDue(e, nil, def, at(59)); r != "" {
		t.Fatalf("due before the default duration: %q", r)
	}
	if r := preview.AutoStopDue(e, nil, def, at(60)); !strings.Contains(r, "after 3600s (autoStop.duration)") {
		t.Fatalf("reason = %q", r)
	}
	// The experiment's own replaces the default whole: no duration limit.
	e.AutoStop = &preview.AutoStop{Requests: 10}
	st := &preview.Stats{}
	st.Evaluated, st.Dropped = 8, 1
	if r := preview.AutoStopDue(e, st, def, at(600)); r != "" {
		t.Fatalf("due at 9 of 10 requests: %q", r)
	}
	st.Dropped = 2
	r := preview.AutoStopDue(e, st, def, at(600))
	if !strings.Contains(r, "after 10 requests") {
		t.Fatalf("reason = %q", r)
	}
	stopped := preview.AutoStopped(e, r, at(600))
	if stopped.PreviewMetadata.State != preview.Suspended || stopped.PreviewMetadata.StopReason != r ||
		e.PreviewMetadata.State != preview.Active {
		t.Fatalf("stopped = %+v (input %+v)", stopped.PreviewMetadata, e.PreviewMetadata)
	}
	if preview.AutoStopDue(stopped, st, def, at(700)) != "" {
		t.Fatal("a SUSPENDED experiment is due")
	}
	again, err := preview.StartPreview(stopped, at(700))
	if err != nil || again.PreviewMetadata.StopReason != "" {
		t.Fatalf("startPreview kept the reason: %+v %v", again.PreviewMetadata, err)
	}
}

func TestAutoStopInput(t *testing.T) {
	t.Parallel()
	in, err := preview.ParseInput([]byte(`{"auto_stop":{"duration":"24h","requests":5}}`))
	if err != nil || in.AutoStop == nil || in.AutoStop.Duration.D != 24*time.Hour || in.AutoStop.Requests != 5 {
		t.Fatalf("ParseInput = %+v %v", in.AutoStop, err)
	}
	b, _ := json.Marshal(in.AutoStop)
	if string(b) != `{"duration":"86400s","requests":5}` {
		t.Fatalf("JSON = %s", b)
	}
	for _, bad := range []string{`{"autoStop":{"duration":5}}`, `{"autoStop":{"duration":"soon"}}`, `{"autoStop":{"requests":-1}}`} {
		if _, err := preview.ParseInput([]byte(bad)); err == nil {
			t.Errorf("%s passed", bad)
		}
	}
	_, err = preview.Create(nil, preview.CreateRequest{Parent: "policies/web", ExperimentID: "e", Policy: webPolicy(),
		AutoStop: &preview.AutoStop{Duration: preview.Duration{D: -time.Second}}}, preview.Settings{}, at(0))
	wantCode(t, err, preview.InvalidArgument)
}
