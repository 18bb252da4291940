module example.com/sandbox-clients

go 1.19
