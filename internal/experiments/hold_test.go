package experiments

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/leadertest"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// allUnapproved: every pull request is a non-writer's whose head no
// writer approved.
type allUnapproved struct{}

func (allUnapproved) PullUnapproved(int, string) bool { return true }
func (allUnapproved) PullInvalid(int, string) bool    { return false }
func (allUnapproved) MergePullRequest(context.Context, int, string) (string, error) {
	return "", errors.New("not merged in this test")
}

// TestUpdateDoesNotStartAHeldPullRequest: a writer's PATCH of a held
// fork's pull request experiment (its annotations, its autoStop) does not
// start its preview: only an approval of its head does. Before, the
// update's auto-start started it without one.
func TestUpdateDoesNotStartAHeldPullRequest(t *testing.T) {
	store := leadertest.NewStore()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{Store: store, Leader: leadingHere{}, Pulls: allUnapproved{}, Logger: testlog.New(t),
		Now: func() time.Time { return now }, Preview: preview.Settings{AutoStart: true}})
	ctx := context.Background()
	e := &preview.Experiment{
		Name:   "policies/web/experiments/pr-7",
		Policy: &policy.Policy{Name: "web", DefaultAction: policy.ActionAllow},
		Source: preview.Source{Kind: preview.SourcePullRequest, Number: 7, HeadCommit: "c0ffee"}, Previewed: true,
		CreateTime: now, UpdateTime: now,
	}
	if err := s.records.putExperiment(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateExperiment(ctx, e.Name, preview.Input{Annotations: map[string]string{"team": "edge"}}); err != nil {
		t.Fatal(err)
	}
	got, err := preview.Get(s.records.experiments(store.State()), e.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.IsActive() {
		t.Fatalf("a PATCH started the held pull request's preview: %+v", got.PreviewMetadata)
	}
	if got.Annotations["team"] != "edge" {
		t.Fatalf("the update was not applied: %v", got.Annotations)
	}
}
