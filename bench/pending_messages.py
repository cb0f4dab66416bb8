#!/usr/bin/env python3
"""Gives every pending pod of a pod dump a PodScheduled condition with a scheduler message
of its own (issue 51: on a live cluster each replica carries the message of its own last
attempt, whose node counts differ attempt by attempt), as `gendump --scale` does not.

    python3 bench/pending_messages.py pods-0-5000.json pods-messages-5000.json

BENCHMARKS.md, "inventory judges look-alike pending pods once whatever their scheduler
message".
"""
import json,sys
src,dst=sys.argv[1],sys.argv[2]
d=json.load(open(src))
n=0
for p in d['items']:
    if p.get('spec',{}).get('nodeName'): continue
    n+=1
    # Each replica's own last attempt: the counts differ attempt by attempt.
    cpu=3000+n%700
    msg=f"0/5000 nodes are available: {cpu} Insufficient cpu, {5000-cpu} node(s) didn't match Pod's node affinity/selector. preemption: 0/5000 nodes are available: 5000 Preemption is not helpful for scheduling."
    p.setdefault('status',{})['phase']='Pending'
    p['status']['conditions']=[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":msg}]
json.dump(d,open(dst,'w'),separators=(',',':'))
print("pending with conditions:",n)
