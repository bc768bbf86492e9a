"""The retrieval pipeline of `RAGAgent.run`: the steps (read, count, aggregate, reformulate, rank,
related rows, company links, fallback), written once as generators of effects."""
