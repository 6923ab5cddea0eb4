\sleep 1000 ms
