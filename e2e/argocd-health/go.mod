module local/pko-argocd-health

go 1.24

require github.com/yuin/gopher-lua v1.1.1
