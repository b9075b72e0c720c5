// Package routeopt holds the options of an HTTP ingress route that are more
// than a value: header rules and basic authentication. They are declared
// under x-ports, carried in the Container spec and the replicated
// Container rows (so this package imports nothing of Ployz's: core/rpc and
// sdk/store use it), and honoured by every ingress (sdk/ingress). Field
// names are frozen; readers ignore unknown ones.
package routeopt
