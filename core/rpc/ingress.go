package rpc

// CmdIngressStatus returns this Machine's ingress status: the routes its
// Ingress Proxy has loaded, as the proxy last wrote them to its status
// file. The answer is sdk/ingress.Status, the status file's own format:
// the plugin writes it, the daemon serves it.
const (
	CmdIngressStatus = "ingress_status"
	CapIngressStatus = "ployz.ingress.status.v1"
)

// IngressStatusRequest has no fields yet.
type IngressStatusRequest struct{}
