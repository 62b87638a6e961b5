// Package gateway puts real gateways in front of real nodes: nginx
// (Debian's package, which scripts/deps.sh installs) with auth_request to
// :authorize and mirror to :mirror, using the configuration that
// docs/gateways.md gives verbatim (testdata/nginx-gateway.conf and
// testdata/reconciler-check.conf).
//
//	go test -count=1 ./test/gateway/
//	RECONCILER_GATEWAY_BENCH=1 go test -count=1 -run TestBench -v ./test/gateway/
package gateway
