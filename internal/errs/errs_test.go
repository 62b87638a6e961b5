package errs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestCodeTravelsWithTheError(t *testing.T) {
	unknown := Sentinel(NotFound, "unknown generation")
	rejected := errors.New("command rejected") // a wrapper without a code
	noLeader := Coded(Unavailable, errors.New("node is not the leader"))
	for _, tc := range []struct {
		err  error
		code Code
		text string
	}{
		{fmt.Errorf("%w: %w: gen 9", rejected, unknown), NotFound, "command rejected: unknown generation: gen 9"},
		{fmt.Errorf("x: %w", noLeader), Unavailable, "x: node is not the leader"},
		{Errorf(Aborted, "etag %q is stale", "e1"), Aborted, `ABORTED: etag "e1" is stale`},
		{fmt.Errorf("outer: %w", Errorf(FailedPrecondition, "cause: %w", unknown)), FailedPrecondition, "outer: FAILED_PRECONDITION: cause: unknown generation"},
	} {
		c, ok := CodeOf(tc.err)
		if !ok || c != tc.code || tc.err.Error() != tc.text {
			t.Errorf("%v: code %v %v, want %v %q", tc.err, c, ok, tc.code, tc.text)
		}
	}
	if !errors.Is(fmt.Errorf("w: %w", unknown), unknown) || errors.Is(Sentinel(NotFound, "unknown generation"), unknown) {
		t.Error("a sentinel matches by identity")
	}
	if !errors.Is(Errorf(InvalidArgument, "bad: %w", unknown), unknown) {
		t.Error("Errorf keeps its %w cause")
	}
	if _, ok := CodeOf(errors.New("plain")); ok {
		t.Error("an error without a code has one")
	}
}

func TestNamesAndStatuses(t *testing.T) {
	for c := Canceled; c <= Unauthenticated; c++ {
		name := c.String()
		if back, ok := ParseCode(name); name[:5] != "CODE_" && (!ok || back != c) {
			t.Errorf("%d: %s parses back to %v %v", c, name, back, ok)
		}
	}
	if NotFound.HTTPStatus() != http.StatusNotFound || FailedPrecondition.HTTPStatus() != http.StatusBadRequest ||
		Aborted.HTTPStatus() != http.StatusConflict || PermissionDenied.HTTPStatus() != http.StatusForbidden {
		t.Error("AIP-193 statuses")
	}
}
