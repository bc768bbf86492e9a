"""PostgREST over HTTP: the client, its URL grammar and error mapping, paging, embedding and the
client-side search and aggregate paths the Supabase backend uses."""
