package extauthz

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// validator is what protoc-gen-validate generates on every Envoy message.
type validator interface{ ValidateAll() error }

// The Any types the snippets name must be registered for protojson.
var _ = []proto.Message{&extauthzv3.ExtAuthz{}, &extauthzv3.ExtAuthzPerRoute{}, &upstreamhttpv3.HttpProtocolOptions{}}

// TestEnvoyConfig: the Envoy configuration docs/gateways.md gives parses
// into Envoy's own protos (unknown fields are errors) and passes their
// validation rules, and the doc shows it verbatim.
func TestEnvoyConfig(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "gateways.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, msg := range map[string]proto.Message{
		"filter.yaml":  &hcmv3.HttpFilter{},
		"route.yaml":   &routev3.Route{},
		"cluster.yaml": &clusterv3.Cluster{},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "envoy", name))
		if err != nil {
			t.Fatal(err)
		}
		if block := "```yaml\n" + string(data) + "```\n"; !strings.Contains(string(doc), block) {
			t.Errorf("docs/gateways.md does not show testdata/envoy/%s verbatim in a yaml block", name)
		}
		if err := parseYAMLProto(data, msg); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := msg.(validator).ValidateAll(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestEnvoyFilterSettings: the filter speaks gRPC to the reconciler cluster
// with the v3 API and denies when no node answers.
func TestEnvoyFilterSettings(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "envoy", "filter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f hcmv3.HttpFilter
	if err := parseYAMLProto(data, &f); err != nil {
		t.Fatal(err)
	}
	var cfg extauthzv3.ExtAuthz
	if err := f.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		t.Fatal(err)
	}
	if f.GetName() != "envoy.filters.http.ext_authz" || cfg.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "reconciler" ||
		cfg.GetFailureModeAllow() || cfg.GetTransportApiVersion().String() != "V3" {
		t.Errorf("filter = %v", &cfg)
	}
	data, err = os.ReadFile(filepath.Join("testdata", "envoy", "route.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var r routev3.Route
	if err := parseYAMLProto(data, &r); err != nil {
		t.Fatal(err)
	}
	var per extauthzv3.ExtAuthzPerRoute
	if err := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"].UnmarshalTo(&per); err != nil {
		t.Fatal(err)
	}
	if per.GetCheckSettings().GetContextExtensions()[ExtPolicy] != "web" {
		t.Errorf("route = %v", &per)
	}
}

// parseYAMLProto reads YAML as Envoy does: YAML to JSON, then protojson.
func parseYAMLProto(data []byte, msg proto.Message) error {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return err
	}
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(js, msg)
}
