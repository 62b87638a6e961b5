package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Experiments changes experiments where the leader loop runs (the
// experiment service, internal/experiments); elsewhere each method answers raftstore.ErrNotLeader
// and the API forwards the request to the leader. Problems with a request
// are *preview.Error.
type Experiments interface {
	CreateExperiment(ctx context.Context, parent, id string, in preview.Input) (*preview.Operation, error)
	UpdateExperiment(ctx context.Context, name string, in preview.Input) (*preview.Operation, error)
	DeleteExperiment(ctx context.Context, name, etag string) (*preview.Operation, error)
	StartPreview(ctx context.Context, name string) (*preview.Operation, error)
	StopPreview(ctx context.Context, name string) (*preview.Operation, error)
	CommitExperiment(ctx context.Context, name string, req preview.CommitRequest) (*preview.Operation, error)
	// CancelOperation and DeleteOperation are the AIP-151 methods that
	// change an operation ("operations/{id}").
	CancelOperation(ctx context.Context, name string) (*preview.Operation, error)
	DeleteOperation(ctx context.Context, name string) error
}

// Preview is the node's preview runtime (internal/node): live decisions
// are offered to it after their answer is written, and it holds the
// cluster's merged experiment stats.
type Preview interface {
	// Offer hands an answered request to preview; it never blocks.
	Offer(policy string, d engine.Decision, req *engine.Request)
	// Previewing reports whether policy has ACTIVE experiments.
	Previewing(policy string) bool
	// Stats returns the cluster's stats of every experiment version (merged
	// on the leader from the stats every node sends with its heartbeat).
	Stats() []preview.Stats
	// Status is the shadow's state, for /v1/status.
	Status() preview.Status
}

// Bounds of experiment writes (a commit pushes to git).
const experimentWriteTimeout = 2 * time.Minute

// routeExperiments handles "/experiments", "/experiments/{id}" and
// "/experiments/{id}:{verb}" under /v1/policies/{policy}.
func (s *policies) routeExperiments(w http.ResponseWriter, r *http.Request, pol, tail string) {
	if s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	if !validPolicyName(pol) {
		s.fail(w, r, errorf(errs.InvalidArgument, "%q is not a policy name: [a-z][a-z0-9-]{0,62}", pol))
		return
	}
	rest, ok := strings.CutPrefix(tail, "/experiments")
	if !ok || (rest != "" && rest[0] != '/') {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", r.URL.Path))
		return
	}
	parent := "policies/" + pol
	if rest == "" || rest == "/" {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.listExperiments(w, r, parent)
		case http.MethodPost:
			s.writeExperiment(w, r, func(ctx context.Context, raw []byte) (*preview.Operation, error) {
				in, err := preview.ParseInput(raw)
				if err != nil {
					return nil, err
				}
				return s.experiments.CreateExperiment(ctx, parent, queryParam(r, "experimentId", "experiment_id"), in)
			})
		default:
			w.Header().Set("Allow", "GET, POST")
			s.fail(w, r, errMethod("method %s is not allowed here; use GET or POST", r.Method))
		}
		return
	}
	id, verb, _ := strings.Cut(rest[1:], ":")
	name := parent + "/experiments/" + id
	if _, _, err := preview.ParseName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	switch verb {
	case "":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.getExperiment(w, r, name)
		case http.MethodPatch:
			s.writeExperiment(w, r, func(ctx context.Context, raw []byte) (*preview.Operation, error) {
				in, err := preview.ParseInput(raw)
				if err != nil {
					return nil, err
				}
				return s.experiments.UpdateExperiment(ctx, name, in)
			})
		case http.MethodDelete:
			s.writeExperiment(w, r, func(ctx context.Context, _ []byte) (*preview.Operation, error) {
				return s.experiments.DeleteExperiment(ctx, name, r.URL.Query().Get("etag"))
			})
		default:
			w.Header().Set("Allow", "GET, PATCH, DELETE")
			s.fail(w, r, errMethod("method %s is not allowed here; use GET, PATCH or DELETE", r.Method))
		}
	case "startPreview", "stopPreview", "commit":
		if !s.allow(w, r, http.MethodPost) {
			return
		}
		s.writeExperiment(w, r, func(ctx context.Context, raw []byte) (*preview.Operation, error) {
			switch verb {
			case "startPreview":
				if err := decodeEmpty(raw); err != nil {
					return nil, err
				}
				return s.experiments.StartPreview(ctx, name)
			case "stopPreview":
				if err := decodeEmpty(raw); err != nil {
					return nil, err
				}
				return s.experiments.StopPreview(ctx, name)
			}
			body, err := decodeCommit(raw)
			if err != nil {
				return nil, err
			}
			return s.experiments.CommitExperiment(ctx, name, body)
		})
	default:
		s.fail(w, r, errorf(errs.NotFound, "no such method %q on experiments: use startPreview, stopPreview or commit", verb))
	}
}

// commitBody is the body of :commit, with the proto3 JSON spelling of
// parentEtag accepted beside the lowerCamelCase one.
type commitBody struct {
	Name            string `json:"name"`
	Etag            string `json:"etag"`
	ParentEtag      string `json:"parentEtag"`
	ParentEtagProto string `json:"parent_etag"`
}

// decodeCommit reads a :commit body strictly.
func decodeCommit(raw []byte) (preview.CommitRequest, error) {
	var b commitBody
	if err := decodeStrict(raw, &b); err != nil {
		return preview.CommitRequest{}, err
	}
	if b.ParentEtag != "" && b.ParentEtagProto != "" && b.ParentEtag != b.ParentEtagProto {
		return preview.CommitRequest{}, errorf(errs.InvalidArgument,
			"parentEtag and parent_etag are the same field and differ: send one of them")
	}
	parent := b.ParentEtag
	if parent == "" {
		parent = b.ParentEtagProto
	}
	return preview.CommitRequest{Etag: b.Etag, ParentEtag: parent}, nil
}

// decodeEmpty accepts {} or {"name": "..."} (AIP request messages).
func decodeEmpty(raw []byte) error {
	var body struct {
		Name string `json:"name"`
	}
	return decodeStrict(raw, &body)
}

// readExperiments decodes the experiments of the replicated state.
func (s *policies) readExperiments() []*preview.Experiment {
	exps, _ := preview.FromState(s.cluster.State())
	return exps
}

func (s *policies) getExperiment(w http.ResponseWriter, r *http.Request, name string) {
	samples, err := withSamples(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	e, err := preview.Get(s.readExperiments(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, s.experimentView(e, s.previewStats(), samples))
}

func (s *policies) listExperiments(w http.ResponseWriter, r *http.Request, parent string) {
	samples, err := withSamples(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	size, err := pageSizeParam(queryParam(r, "pageSize", "page_size"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := preview.List(s.readExperiments(), preview.ListRequest{Parent: parent, PageSize: size,
		PageToken: queryParam(r, "pageToken", "page_token"), Filter: r.URL.Query().Get("filter")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stats := s.previewStats()
	out := apiv1.ExperimentList{Experiments: make([]apiv1.Experiment, 0, len(res.Experiments)), NextPageToken: res.NextPageToken}
	for _, e := range res.Experiments {
		out.Experiments = append(out.Experiments, s.experimentView(e, stats, samples))
	}
	s.writeValue(w, r, out)
}

// writeExperiment runs a mutating experiment method: on the leader here,
// elsewhere forwarded (once) to the leader, as rollback is. The answer is
// the Operation.
func (s *policies) writeExperiment(w http.ResponseWriter, r *http.Request,
	run func(ctx context.Context, raw []byte) (*preview.Operation, error)) {
	if s.experiments == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (this node has no leader loop)", r.URL.Path))
		return
	}
	raw, ok := s.admitBody(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), experimentWriteTimeout)
	defer cancel()
	s.leaderOnly(ctx, w, r, raw, func(ctx context.Context) (any, error) {
		op, err := run(ctx, raw)
		return apiv1.FromOperation(op), err
	})
}

// offer hands an answered decision to preview; called after the answer is
// written, outside the timed part of the handler.
func (s *decisions) offer(name string, d *engine.Decision, req *engine.Request) {
	if s.preview != nil {
		s.preview.Offer(name, *d, req)
	}
}
