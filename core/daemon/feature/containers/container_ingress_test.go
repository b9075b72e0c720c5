package containers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/rpc"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

func TestContainerRowCarriesIngressRoutes(t *testing.T) {
	ob := rpc.ContainerObservation{Namespace: "demo", Service: "web", Ready: true,
		Spec: &rpc.ContainerSpec{Ingress: []rpc.IngressRoute{{Hostname: "hello.example.test", ContainerPort: 8080},
			{Protocol: "tcp", Port: 8081, ContainerPort: 8080}}}}
	b := ServiceRow(ob, container.InspectResponse{})
	if len(b.Ingress) != 2 || b.Ingress[0].Hostname != "hello.example.test" || b.Ingress[0].ContainerPort != 8080 ||
		b.Ingress[1] != (sdkstore.IngressRoute{Protocol: "tcp", Port: 8081, ContainerPort: 8080}) {
		t.Fatalf("row %+v", b)
	}
	raw, _ := json.Marshal(b)
	if !strings.Contains(string(raw), `"ingress":[{"hostname":"hello.example.test","container_port":8080},{"container_port":8080,"protocol":"tcp","port":8081}]`) {
		t.Fatalf("row JSON %s", raw)
	}
}
