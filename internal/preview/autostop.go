package preview

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AutoStop ends a preview by itself, so that an experiment nobody
// watches does not preview for ever: after Duration since its preview
// started, or once Requests live requests of its version were evaluated
// or dropped (the cluster's merged counts), whichever comes first; zero
// means no limit of that kind. An experiment's own autoStop (set on
// create or update) replaces the default ([preview] auto_stop_after and
// auto_stop_requests) as a whole.
type AutoStop struct {
	Duration Duration `json:"duration,omitzero"`
	Requests uint64   `json:"requests,omitempty"`
}

// IsZero reports whether a stops nothing.
func (a AutoStop) IsZero() bool { return a.Duration.D <= 0 && a.Requests == 0 }

// maxAutoStop bounds a duration from the network (ten years).
const maxAutoStop = 10 * 365 * 24 * time.Hour

// check is INVALID_ARGUMENT for a duration out of range.
func (a AutoStop) check() error {
	if a.Duration.D < 0 || a.Duration.D > maxAutoStop {
		return errorf(InvalidArgument, "autoStop.duration %s must be between 0s and %.0fs", a.Duration, maxAutoStop.Seconds())
	}
	return nil
}

// Duration is a time.Duration in proto3 JSON ("86400s"); it also reads
// Go's spelling ("24h").
type Duration struct{ D time.Duration }

// IsZero is for omitzero.
func (d Duration) IsZero() bool { return d.D == 0 }

func (d Duration) String() string { return strconv.FormatFloat(d.D.Seconds(), 'f', -1, 64) + "s" }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"86400s\": %w", err)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("duration %q: want seconds such as \"86400s\" (or \"24h\")", s)
	}
	d.D = v
	return nil
}

// AutoStopDue says why an ACTIVE experiment must stop now ("": it need
// not): its own AutoStop, else def, against the time since its preview
// started and st, the merged stats of its current version (nil: none).
func AutoStopDue(e *Experiment, st *Stats, def AutoStop, now time.Time) string {
	if !e.IsActive() {
		return ""
	}
	a := def
	if e.AutoStop != nil {
		a = *e.AutoStop
	}
	if d := a.Duration.D; d > 0 && !now.Before(e.PreviewMetadata.StartTime.Add(d)) {
		return fmt.Sprintf("auto-stopped after %s (autoStop.duration)", a.Duration)
	}
	if st != nil && a.Requests > 0 && st.Evaluated+st.Dropped >= a.Requests {
		return fmt.Sprintf("auto-stopped after %d requests (autoStop.requests %d)", st.Evaluated+st.Dropped, a.Requests)
	}
	return ""
}

// AutoStopped is e suspended by the system at now, with the reason shown
// in previewMetadata.stopReason until the next startPreview.
func AutoStopped(e *Experiment, reason string, now time.Time) *Experiment {
	c, err := StopPreview(e, now)
	if err != nil {
		return e
	}
	c.PreviewMetadata.StopReason = reason
	return c
}

// CurrentStats is the stats of e's current version in merged, nil when
// there are none.
func CurrentStats(e *Experiment, merged []Stats) *Stats {
	for i := range merged {
		if merged[i].Experiment == e.Name && merged[i].ExperimentEtag == e.Etag {
			return &merged[i]
		}
	}
	return nil
}
