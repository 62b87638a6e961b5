// Package tlsconfig is the node-to-node trust of a cluster: a cluster CA,
// one certificate per node that names the node id, and the TLS settings
// that make raft and the node-to-node HTTP calls mutual TLS (as Consul,
// etcd and rqlite do).
//
// A node's identity is the URI SAN spiffe://reconciler/node/<id> of a
// certificate that chains to the cluster CA; a peer without one is refused
// during the handshake. Node (node.go) reloads the CA, certificate and key
// when their files change, without a restart, through the one reloading
// mechanism of the module (reload.go), which also serves the user API's
// certificate (APIServer, apiserver.go); Mux (mux.go) accepts TLS on
// the raft port and hands each connection to raft or to the node-to-node
// HTTP server by its ALPN protocol; certs.go creates a CA and node
// certificates for `reconciler certs`.
package tlsconfig
