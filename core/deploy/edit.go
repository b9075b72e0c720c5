package deploy

import (
	"bytes"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v4"
)

// SetReplicas returns compose with service's deploy.replicas set to n
// (and any scale: key dropped, since it would override it). Comments
// and the rest of the file are kept.
func SetReplicas(compose []byte, service string, n int) ([]byte, error) {
	return editService(compose, service, func(parent, svc *yaml.Node) error {
		deleteKey(svc, "scale")
		dep := child(svc, "deploy")
		if dep == nil {
			dep = &yaml.Node{Kind: yaml.MappingNode}
			svc.Content = append(svc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "deploy"}, dep)
		}
		if dep.Kind != yaml.MappingNode {
			return fmt.Errorf("service %q: deploy: not a mapping", service)
		}
		val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
		if r := child(dep, "replicas"); r != nil {
			*r = *val
		} else {
			dep.Content = append(dep.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "replicas"}, val)
		}
		return nil
	})
}

// RemoveService returns compose without service.
func RemoveService(compose []byte, service string) ([]byte, error) {
	return editService(compose, service, func(parent, _ *yaml.Node) error {
		deleteKey(parent, service)
		if len(parent.Content) == 0 {
			return fmt.Errorf("service %q is the last one; remove the project instead (ployz project rm)", service)
		}
		return nil
	})
}

func editService(compose []byte, service string, f func(services, svc *yaml.Node) error) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(compose, &doc); err != nil {
		return nil, fmt.Errorf("saved compose: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("saved compose: empty document")
	}
	svcs := child(doc.Content[0], "services")
	if svcs == nil || svcs.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("saved compose: no services mapping")
	}
	svc := child(svcs, service)
	if svc == nil {
		return nil, fmt.Errorf("service %q is not declared in the saved state", service)
	}
	if svc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("service %q: not a mapping", service)
	}
	if err := f(svcs, svc); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// CheckService returns an error unless compose declares service.
func CheckService(compose []byte, service string) error {
	_, err := editService(compose, service, func(_, _ *yaml.Node) error { return nil })
	return err
}
