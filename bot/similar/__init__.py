"""Papers like these: ranking a subscriber's papers by the papers they liked and disliked.

`text` (what is read of a paper, hashes), `space` (the day's papers as vectors, once per
run), `model` (a subscriber's fitted model and its bytes), `rank` (one subscriber's ranking
of the day), all pure; `endpoint` (an OpenAI-compatible /v1/embeddings endpoint, fastembed)
does the I/O of dense embeddings, `embeddings` says where they come from (made at start);
`ranking` is a run's one entry: the space, the vectors kept, each reader's model and ranking.
"""
