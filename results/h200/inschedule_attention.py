#!/usr/bin/env python3
"""Attention inside the measured H200 schedules, against the profiles' standalone times.

Like inschedule_gemms.py, for the attention ops on the 8-token grid: the profile's time at
the op's exact causal FLOPs (log-log between the profiled points; the formula is checked
against the profiles' own FLOP counts), then (1) measured / profile for attention beside
nothing and (2) the rate while beside the copy (at least 30% of the op overlapped), per
model, chunk length and prefix. Measured numbers only; nothing here is fitted.
Usage: results/h200/inschedule_attention.py  (from the repository root)
"""
import json,glob,math,statistics,collections
P={}
for f in glob.glob('configs/profiles/h200-*.json'):
    d=json.load(open(f)); pts=sorted((a['flops'],a['median_us'],a['q_tokens'],a['prefix'],a['q_heads'],a['head_dim']) for a in d['attention'] if a['q_tokens']>1)
    P[d['model']]=pts
def fl(q,p,h,dim): return 4.0*h*dim*(q*p+q*(q+1)/2)
# check formula
for m,pts in P.items():
    f,t,q,p,h,dim=pts[len(pts)//2]; print(m,'formula/profile flops',fl(q,p,h,dim)/f)
def T(m,x):
    pts=P[m]; xs=[a[0] for a in pts]
    import bisect
    i=bisect.bisect_left(xs,x)
    if i<len(xs) and xs[i]==x: return pts[i][1]
    if i==0 or i==len(xs): return None
    (x0,t0),(x1,t1)=(pts[i-1][0],pts[i-1][1]),(pts[i][0],pts[i][1])
    return math.exp(math.log(t0)+(math.log(x)-math.log(x0))/(math.log(x1)-math.log(x0))*(math.log(t1)-math.log(t0)))
rates=collections.defaultdict(list); alone=collections.defaultdict(list)
for f in glob.glob('results/h200/2026-11-29/validate-*.json'):
    for c in json.load(open(f))['cases']:
        st=c['strategy']; ch=st.get('chunks') or [c['seq_len']]
        if st['name']!='iso': ch=[c['seq_len']]
        h,dim=P[c['model']][0][4],P[c['model']][0][5]
        comms=[(o['measured_start_us'],o['measured_start_us']+o['measured_us']) for o in c['ops'] if o['stream']=='comm']
        for o in c['ops']:
            if o['kind']!='attention': continue
            k=o['chunk'] if st['name']=='iso' else 0
            q=ch[k]; p=sum(ch[:k])
            if q%8: continue
            t=T(c['model'],fl(q,p,h,dim))
            if t is None: continue
            s,d=o['measured_start_us'],o['measured_us']
            ov=sum(max(0,min(s+d,b)-max(s,a)) for a,b in comms)
            if ov==0: alone[c['model']].append(d/t)
            elif ov>=0.3*d: rates[(c['model'],q,p)].append(((t-(d-ov))/ov, ov/d))
for m,v in alone.items(): print(m,'attention beside nothing: measured/profile median %.3f n=%d'%(statistics.median(v),len(v)))
for k in sorted(rates): 
    v=rates[k]; print(k, len(v), 'rate %.2f'%statistics.median(x[0] for x in v), 'overlap frac %.2f'%statistics.median(x[1] for x in v))
