// The order keeper: a Kubernetes operator in Go with no dependencies (the standard library
// only), so it builds offline and fast, for the framework's fault tests and fault exploration.
module example.com/orderkeeper

go 1.22
