# Host check of t35-tail-tiles.patch's delta TAIL mapping: every (b, hv, v) once.
def decode1_tile(B,H,G,V,lpr,nch,sms,kda,rounds):
    rpp=256//lpr; cap=max(rounds,1)*(16//nch)*rpp
    span=G if G>1 else (H if kda else 1)
    nh,vt,kpb=1,V,1
    if V>cap: vt=cap
    else:
        n=span
        while n>1 and (span%n or n*V>cap): n-=1
        nh=n
    kpb=1 if G>1 else nh
    target=2*sms
    while B*H*G//nh*((V+vt-1)//vt)<target:
        if nh>1:
            n=nh-1
            while span%n: n-=1
            nh=n; kpb=1 if G>1 else nh
        elif vt>rpp: vt=max(rpp,((vt+1)//2+rpp-1)//rpp*rpp)
        else: break
    return nh,vt,kpb
def check(B,H,G,V,kda,nch,tr,tvt=0):
    lpr=8; rpp=32; sms=132
    nh,vt,kpb=decode1_tile(B,H,G,V,lpr,nch,sms,kda,2 if nch==4 else 4)
    vtiles=(V+vt-1)//vt
    unh,uvt,ukpb=decode1_tile(B,H,G,V,lpr,nch,sms,kda,1)
    if tvt>0 and tvt%rpp==0 and tvt<uvt: uvt=tvt
    uvtiles=(V+uvt-1)//uvt
    gx=(G*kpb//nh)*vtiles; gy=H//kpb
    tb0=B-tr; big=gx*gy*tb0
    small=(G*ukpb//unh)*uvtiles*(H//ukpb)*tr
    seen={}
    for i in range(big+small):
        if i>=big: j=i-big; KPB,NH,VT,VTI,r0=ukpb,unh,uvt,uvtiles,tb0
        else: j=i; KPB,NH,VT,VTI,r0=kpb,nh,vt,vtiles,0
        gxx=G*KPB//NH*VTI; gyy=H//KPB; yz=j//gxx; z=yz//gyy
        bx=j-yz*gxx; by=yz-z*gyy; b=z+r0
        kh0=by*KPB; hgroup=bx//VTI; vtile=bx-hgroup*VTI
        hv0=kh0*G+hgroup*NH; v0=vtile*VT; vtt=min(VT,V-v0)
        for rr in range(NH*vtt):
            h=rr//vtt; key=(b,hv0+h,v0+rr%vtt)
            seen[key]=seen.get(key,0)+1
    ok=len(seen)==B*H*G*V and all(c==1 for c in seen.values()) and all(k[0]<B and k[1]<H*G and k[2]<V for k in seen)
    print(B,H,G,V,'kda' if kda else 'gdn',nch,tr,tvt,(nh,vt,kpb),(unh,uvt,ukpb),'OK' if ok else 'BAD')
for B in (40,64,256):
    for (H,G,kda) in ((16,2,False),(16,3,False),(16,4,False),(32,1,True)):
        for nch in (4,2):
            for tr,tvt in ((7,0),(16,0),(16,64),(5,64)):
                check(B,H,G,128,kda,nch,tr,tvt)
